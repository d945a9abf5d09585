"""Demo data for `make up`: the example harness, committed into a local git repo (in the
instance's var/ directory, BELVEDIR_VAR_DIR)."""

import shutil
import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from belvedir.models import Membership
from harnesses.models import Harness
from harnesses.services import harness_create


class Command(BaseCommand):
    help = "Create the demo harness (examples/contract-harness as a local git repo) for a user's project."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True)

    def handle(self, *args, **opts):
        membership = (
            Membership.objects.filter(user__email__iexact=opts["email"])
            .select_related("organization")
            .first()
        )
        if membership is None:
            raise CommandError(f"no user {opts['email']}")
        project = membership.organization.projects.order_by("created_at").first()
        repo = Path(settings.BELVEDIR_VAR_DIR) / "demo-harness"
        if not (repo / ".git").exists():
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(Path(settings.BASE_DIR) / "examples" / "contract-harness", repo)
            git = ["git", "-c", "user.name=demo", "-c", "user.email=demo@belvedir.local"]
            subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
            subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
            subprocess.run([*git, "commit", "-qm", "demo harness"], cwd=repo, check=True)
        if not Harness.objects.filter(project=project, name="Demo contract harness").exists():
            harness_create(
                project=project,
                name="Demo contract harness",
                repo_url=f"file://{repo}",
                install_command="bash install.sh",
                run_command="python3 run.py",
                env={"SCORE": "0.85", "SLEEP": "3"},
                tasks='[{"id": "demo-1", "prompt": "Say hello."}]\n',
                created_by=membership.user,
            )
        self.stdout.write(f"demo harness ready in {project}")
