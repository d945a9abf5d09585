"""Build the sandbox image (`belvedir-sandbox:latest`) if it is missing, or with --force."""

from django.core.management.base import BaseCommand, CommandError

from belvedir.sandbox_config import image_config
from sandboxes.base import SandboxError
from sandboxes.image import build_image


class Command(BaseCommand):
    help = (
        "Build the sandbox image: the Dockerfile when a registry answers, else debootstrap + "
        "docker import. Returns at once when the image already exists (unless --force)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
        recipe = parser.add_mutually_exclusive_group()
        recipe.add_argument(
            "--offline", action="store_true", help="debootstrap + docker import (no registry)"
        )
        recipe.add_argument(
            "--dockerfile", action="store_true", help="docker build (needs an image registry)"
        )
        parser.add_argument(
            "--refresh-rootfs",
            action="store_true",
            help="ignore the cached debootstrap rootfs (or the docker build cache)",
        )

    def handle(self, *args, **opts):
        recipe = "offline" if opts["offline"] else "dockerfile" if opts["dockerfile"] else "auto"
        try:
            result = build_image(
                force=opts["force"],
                recipe=recipe,
                refresh_rootfs=opts["refresh_rootfs"],
                config=image_config(),
                say=lambda line: self.stdout.write(line),
            )
        except SandboxError as exc:
            raise CommandError(f"sandbox image: {exc}") from exc
        self.stdout.write(self.style.SUCCESS(f"{result.image} ready ({result.recipe})"))
