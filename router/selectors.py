"""The router's reads."""

from runs.model_access import covered_models_allowed
from runs.models import Run
from runs.selectors import run_covered_models


def covered_models_list(*, run: Run) -> list[dict]:
    """The covered models this run may call: its own model and judge when covered, no
    Chinese lab's for a project without the permission."""
    if not run.covered:
        return []
    own = run_covered_models(run)
    return [
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
