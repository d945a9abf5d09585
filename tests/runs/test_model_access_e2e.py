"""The model settings a real sandbox gets: the router and the run's key for a covered run, the
inferred provider for a blank base (the example harness reports the env it saw)."""

import pytest

from models_registry.models import CoveredModel, Lab
from runs.executor import execute_run
from runs.models import Run

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def executed(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    return run


def covered_llama() -> CoveredModel:
    """The seeded catalog entry, made again if a transactional test's flush removed the seed."""
    lab, _ = Lab.objects.get_or_create(
        slug="meta", defaults={"name": "Meta", "vendor_prefixes": "meta-llama"}
    )
    entry, _ = CoveredModel.objects.get_or_create(
        model_id="meta-llama/llama-3.1-8b-instruct",
        defaults={
            "display_name": "Llama 3.1 8B Instruct",
            "lab": lab,
            "input_price_micros": 20_000,
            "output_price_micros": 30_000,
        },
    )
    return entry


def test_a_covered_run_calls_the_router_with_its_own_key(sandbox_settings, launch):
    sandbox_settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-or-operator"
    covered_llama()
    run = executed(launch(env={"ECHO_SECRET": "1"}, model="meta-llama/llama-3.1-8b-instruct"))
    seen = run.results["seen_env"]
    router = sandbox_settings.BELVEDIR_SANDBOX_BASE_URL + "/api/v1"
    assert seen["MODEL"] == "meta-llama/llama-3.1-8b-instruct"
    assert seen["MODEL_API_BASE"] == router == run.model_api_base_resolved
    assert run.results["has_model_api_key"] is True
    # The key it got is the run's own (a secret: redacted in the log like the run key).
    assert "the model key is [redacted]" in run.log_tail
    assert "sk-or-operator" not in run.log_tail and "sk-or-operator" not in str(run.results)
    assert (
        run.covered and run.covered_cap_micros == sandbox_settings.BELVEDIR_COVERED_SPEND_CAP_MICROS
    )


def test_with_the_proxy_off_a_blank_base_reaches_the_sandbox_as_the_inferred_provider(
    sandbox_settings, launch
):
    run = executed(
        launch(
            env={"BELVEDIR_MODEL_PROXY": "off"},
            model="claude-sonnet-4-5",
            model_api_key="sk-ant-own",
        )
    )
    assert run.results["seen_env"]["MODEL_API_BASE"] == "https://api.anthropic.com/v1/"
    assert not run.covered and not run.model_proxied
