"""Re-encrypt every encrypted column with the first FIELD_ENCRYPTION_KEY (after a rotation)."""

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from belvedir import crypto
from belvedir.text import counted


def encrypted_fields() -> list[tuple[type, str]]:
    """(model, column) for every `<something>_encrypted` text column in the project."""
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.name.endswith(crypto.ENCRYPTED_SUFFIX) and field.get_internal_type() == "TextField"
    ]


class Command(BaseCommand):
    help = (
        "Re-encrypt every encrypted field with the first key of FIELD_ENCRYPTION_KEY. Rotate by "
        "listing the new key first (new,old), running this, then dropping the old key."
    )

    def handle(self, *args, **options):
        total = 0
        for model, name in encrypted_fields():
            changed = 0
            with transaction.atomic():
                rows = model._default_manager.select_for_update().exclude(**{name: ""})
                for pk, token in rows.values_list("pk", name).iterator():
                    try:
                        fresh = crypto.reencrypt(token)
                    except ValueError:
                        raise CommandError(
                            f"{model._meta.label}.{name} of {pk} cannot be decrypted with any "
                            "FIELD_ENCRYPTION_KEY key; nothing of that model was changed."
                        ) from None
                    if fresh != token:
                        model._default_manager.filter(pk=pk).update(**{name: fresh})
                        changed += 1
            total += changed
            self.stdout.write(f"{model._meta.label}.{name}: {changed} re-encrypted")
        self.stdout.write(
            self.style.SUCCESS(f"{counted(total, 'value')} re-encrypted with the current key.")
        )
