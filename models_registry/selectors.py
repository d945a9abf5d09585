"""Model reads: which lab made a model, whether the platform covers it; fine-tuned models."""

from django.db.models import QuerySet

from belvedir import crypto
from models_registry.models import CoveredModel, FineTunedModel, HuggingFaceToken, Lab


def _split(model_id: str) -> tuple[str, str]:
    """(vendor, name) of a model id, lowercased: `Qwen/Qwen2.5-7B` → ("qwen", "qwen2.5-7b");
    a bare id has no vendor; a longer path (`accounts/x/models/y`) keeps its last part."""
    parts = model_id.strip().lower().split("/")
    if len(parts) == 1:
        return "", parts[0]
    return parts[0], parts[-1]


def lab_for_model(model_id: str) -> Lab | None:
    """The lab behind `model_id`: by its `vendor/` prefix, else by the longest name prefix."""
    vendor, name = _split(model_id)
    if not name:
        return None
    labs = list(Lab.objects.all())
    if vendor:
        for lab in labs:
            if vendor in lab.vendors:
                return lab
    best, best_length = None, 0
    for lab in labs:
        for prefix in lab.names:
            if name.startswith(prefix) and len(prefix) > best_length:
                best, best_length = lab, len(prefix)
    return best


def covered_model(model_id: str) -> CoveredModel | None:
    """The enabled catalog entry for `model_id` (exactly as the upstream names it), if any."""
    model_id = model_id.strip()
    if not model_id:
        return None
    return (
        CoveredModel.objects.select_related("lab").filter(model_id=model_id, enabled=True).first()
    )


def covered_models():
    return CoveredModel.objects.select_related("lab").filter(enabled=True)


def fine_tuned_models_for(*, project) -> QuerySet[FineTunedModel]:
    """The project's fine-tuned models, newest first."""
    return FineTunedModel.objects.filter(project=project)


def hf_token(*, organization) -> HuggingFaceToken | None:
    """The organization's token row (when and by whom it was set); the value stays encrypted."""
    return HuggingFaceToken.objects.filter(organization=organization).first()


def hf_token_value(*, organization) -> str:
    """The token itself, for a sandbox only."""
    row = hf_token(organization=organization)
    return crypto.decrypt(row.token_encrypted) if row else ""
