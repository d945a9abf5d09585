"""Writes for fine-tuned models and the organization's Hugging Face token."""

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from belvedir import audit, crypto
from belvedir.errors import Invalid
from belvedir.models import Organization, Project
from belvedir.validators import has_unstorable
from models_registry.adapters import validate_adapter_zip
from models_registry.models import FineTunedModel, HuggingFaceToken

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,119}$")
# A Hugging Face repo id: `name` or `owner/name`, letters, digits, `-`, `_`, `.` (96 each).
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
BASE_MODEL = re.compile(rf"^(?:{_HF_PART}/)?{_HF_PART}$")
HF_TOKEN = re.compile(r"^hf_[A-Za-z0-9]{20,200}$")


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not NAME.match(name):
        raise Invalid(
            "name must be 1 to 120 characters: letters, digits and . _ - : @ + /, starting "
            "with a letter or digit (it is the run's MODEL_LABEL and results.model).",
            field="name",
        )
    return name


def check_base_model(base_model: str) -> str:
    base_model = (base_model or "").strip()
    if not BASE_MODEL.match(base_model) or ".." in base_model or "--" in base_model:
        raise Invalid(
            "base_model must be a Hugging Face model id such as meta-llama/Llama-3.1-8B "
            "(owner/name: letters, digits, - _ .).",
            field="base_model",
        )
    return base_model


def fine_tuned_model_create(
    *,
    project: Project,
    name: str,
    base_model: str,
    adapter,
    gated: bool = False,
    created_by=None,
) -> FineTunedModel:
    """Check the label, the base id and the adapter zip (from its file object, never read
    whole), then store the zip through the default storage and the model row."""
    name = _check_name(name)
    base_model = check_base_model(base_model)
    if adapter is None:
        raise Invalid("Upload the adapter: a LoRA adapter zip.", field="adapter")
    if FineTunedModel.objects.filter(project=project, name=name).exists():
        raise Invalid(f"This project already has a model named {name!r}.", field="name")
    validate_adapter_zip(adapter, size=adapter.size)
    model = FineTunedModel(
        project=project,
        name=name,
        base_model=base_model,
        gated=bool(gated),
        adapter_size=adapter.size,
        created_by=created_by,
    )
    adapter.seek(0)
    model.adapter.save(f"{model.pk}.zip", adapter, save=False)
    try:
        with transaction.atomic():
            model.save(force_insert=True)
            audit.audit_record(
                action=audit.MODEL_UPLOAD,
                organization=project.organization,
                target=model.pk,
                metadata={"name": name, "base_model": base_model, "bytes": adapter.size},
            )
    except IntegrityError:
        model.adapter.delete(save=False)
        raise Invalid(f"This project already has a model named {name!r}.", field="name") from None
    return model


def fine_tuned_model_delete(*, model: FineTunedModel) -> None:
    """Delete the model; its adapter file goes on commit (models.py's post_delete receiver).
    Runs keep their results and the label."""
    with transaction.atomic():
        audit.audit_record(
            action=audit.MODEL_DELETE,
            organization=model.project.organization,
            target=model.pk,
            metadata={"name": model.name},
        )
        model.delete()


def hf_token_set(*, organization: Organization, token: str, updated_by=None) -> None:
    token = (token or "").strip()
    if not HF_TOKEN.match(token) or has_unstorable(token):
        raise Invalid(
            "token must be a Hugging Face access token (hf_ followed by letters and digits).",
            field="token",
        )
    with transaction.atomic():
        HuggingFaceToken.objects.update_or_create(
            organization=organization,
            defaults={
                "token_encrypted": crypto.encrypt(token),
                "updated_by": updated_by,
                "updated_at": timezone.now(),
            },
        )
        audit.audit_record(
            action=audit.HF_TOKEN_CHANGE, organization=organization, metadata={"token": "set"}
        )


def hf_token_clear(*, organization: Organization) -> None:
    with transaction.atomic():
        if HuggingFaceToken.objects.filter(organization=organization).delete()[0]:
            audit.audit_record(
                action=audit.HF_TOKEN_CHANGE,
                organization=organization,
                metadata={"token": "removed"},
            )
