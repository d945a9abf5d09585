import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import belvedir.ids


def fill_member_ids(apps, schema_editor):
    Membership = apps.get_model("belvedir", "Membership")
    for membership in Membership.objects.filter(public_id__isnull=True).only("pk"):
        membership.public_id = belvedir.ids.member_id()
        membership.save(update_fields=["public_id"])


class Migration(migrations.Migration):
    dependencies = [
        ("belvedir", "0003_audit_event"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="membership",
            name="public_id",
            field=models.CharField(editable=False, max_length=32, null=True),
        ),
        migrations.RunPython(fill_member_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="membership",
            name="public_id",
            field=models.CharField(
                default=belvedir.ids.member_id, editable=False, max_length=32, unique=True
            ),
        ),
        migrations.CreateModel(
            name="Invitation",
            fields=[
                (
                    "id",
                    models.CharField(
                        default=belvedir.ids.invitation_id,
                        editable=False,
                        max_length=32,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("email", models.EmailField(max_length=150)),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("owner", "Owner"),
                            ("admin", "Admin"),
                            ("member", "Member"),
                            ("readonly", "Read-only member"),
                        ],
                        default="member",
                        max_length=16,
                    ),
                ),
                ("token_hash", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires_at", models.DateTimeField()),
                ("accepted_at", models.DateTimeField(blank=True, null=True)),
                (
                    "invited_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="invitations",
                        to="belvedir.organization",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("accepted_at__isnull", True)),
                        fields=("organization", "email"),
                        name="one_pending_invitation_per_email",
                    )
                ],
            },
        ),
    ]
