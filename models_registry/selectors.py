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


def _vendor_lab(labs: list[Lab], vendor: str) -> Lab | None:
    if vendor:
        for lab in labs:
            if vendor in lab.vendors:
                return lab
    return None


def _name_lab(labs: list[Lab], name: str) -> Lab | None:
    """The lab whose bare-name prefix is the longest that `name` starts with."""
    best, best_length = None, 0
    for lab in labs:
        for prefix in lab.names:
            if name.startswith(prefix) and len(prefix) > best_length:
                best, best_length = lab, len(prefix)
    return best


def lab_for_model(model_id: str) -> Lab | None:
    """The lab behind `model_id`: by its `vendor/` prefix, else by the longest name prefix."""
    vendor, name = _split(model_id)
    if not name:
        return None
    labs = list(Lab.objects.all())
    return _vendor_lab(labs, vendor) or _name_lab(labs, name)


def chinese_lab_for_model(model_id: str, *, labs: list[Lab] | None = None) -> Lab | None:
    """The Chinese lab behind `model_id` by its vendor or by its model name, whichever says so:
    another maker's build of a Chinese lab's model (`nvidia/DeepSeek-R1-FP4`) is still that
    lab's model, and a reseller's path (`accounts/x/models/qwen3-8b`) hides nothing. `labs`:
    the labs already read, to judge many models with one query."""
    vendor, name = _split(model_id)
    if not name:
        return None
    if labs is None:
        labs = list(Lab.objects.all())
    for lab in (_vendor_lab(labs, vendor), _name_lab(labs, name)):
        if lab is not None and lab.is_chinese:
            return lab
    return None


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
