"""The router's reads."""

from django.conf import settings

from belvedir.models import Project
from models_registry.models import CoveredModel, Lab
from models_registry.selectors import chinese_lab_for_model, covered_models
from router.targets import own_key_models
from runs.models import Run
from runs.selectors import run_covered_models


def covered_models_allowed(*, project: Project) -> list[CoveredModel]:
    """Every catalog entry `runs.model_access.covered_model_check` lets `project`'s covered
    runs call, read in two queries whatever the catalog's size (the router's model list): none
    when the platform covers no usage, no Chinese lab's model unless the project allows them."""
    if not settings.BELVEDIR_ROUTER_UPSTREAM_KEY:
        return []
    entries = list(covered_models())
    if project.chinese_models_allowed:
        return entries
    labs = list(Lab.objects.all())
    return [
        entry
        for entry in entries
        if not entry.lab.is_chinese and chinese_lab_for_model(entry.model_id, labs=labs) is None
    ]


def covered_models_list(*, run: Run) -> list[dict]:
    """The models this run may call through the router: its model and judge when its own key
    calls them (owned by "your provider"), and when covered, no Chinese lab's for a project
    without the permission."""
    proxied = [
        {"id": name, "object": "model", "created": 0, "owned_by": "your provider"}
        for name in dict.fromkeys(own_key_models(run))
    ]
    if not run.covered:
        return proxied
    own = run_covered_models(run)
    return proxied + [
        {
            "id": entry.model_id,
            "object": "model",
            "created": 0,
            "owned_by": entry.lab.name,
            "name": entry.display_name,
            "pricing": {
                "input_micros_per_mtok": entry.input_price_micros,
                "output_micros_per_mtok": entry.output_price_micros,
            },
            "max_output_tokens": entry.max_output_tokens,
        }
        for entry in covered_models_allowed(project=run.project)
        if entry.model_id in own
    ]
