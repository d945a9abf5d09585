"""Provision an organization, project and owner idempotently; print a project key last.

With --key-file the key is `make up`'s: its plaintext kept in that file (mode 0600) and
printed again on the next start while the key is active in this project, so a restart does
not mint one more (revoked in the settings, the next start makes a new one)."""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from belvedir import services
from belvedir.models import ApiKey, Membership, Organization, Project, Role
from belvedir.secret_files import secret_file_read, secret_file_write


class Command(BaseCommand):
    help = "Create (idempotently) an organization, project and owner, then print a project key."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--project", required=True)
        parser.add_argument("--email", required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--key-name", default="bootstrap")
        parser.add_argument(
            "--key-file",
            type=Path,
            help="keep the key's plaintext here (mode 0600) and print it again while it is active",
        )
        parser.add_argument(
            "--superuser", action="store_true", help="also make the owner a Django admin"
        )

    @transaction.atomic
    def handle(self, *args, **opts):
        User = get_user_model()
        email = opts["email"].strip().lower()
        if "@" not in email:
            raise CommandError("--email must be an email address")
        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            user = User.objects.create_user(username=email, email=email, password=opts["password"])
            self.stderr.write(f"created user {email}")
        elif not user.check_password(opts["password"]):
            # Only when it changed: a new hash would sign the user's sessions out.
            user.set_password(opts["password"])
        if opts["superuser"]:
            user.is_staff = user.is_superuser = True
        user.save()
        org = Organization.objects.filter(name=opts["org"], memberships__user=user).first()
        if org is None:
            org = Organization.objects.filter(
                name=opts["org"]
            ).first() or Organization.objects.create(name=opts["org"])
            self.stderr.write(f"organization {org.name} ({org.pk})")
        Membership.objects.get_or_create(user=user, organization=org, defaults={"role": Role.OWNER})
        project, _ = Project.objects.get_or_create(organization=org, name=opts["project"])
        key_file = opts["key_file"]
        plaintext = secret_file_read(key_file) if key_file else ""
        key = services.api_key_active(plaintext) if plaintext else None
        if key is None or key.project_id != project.pk or key.kind != ApiKey.Kind.PROJECT:
            _, plaintext = services.api_key_create(
                project=project, name=opts["key_name"], created_by=user
            )
            if key_file:
                secret_file_write(key_file, plaintext)
        self.stdout.write(plaintext)
