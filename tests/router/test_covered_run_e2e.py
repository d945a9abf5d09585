"""End to end: a covered run in the Docker sandbox. Launched with a covered model and no model
key, its harness gets the router (through the sandbox gateway) and the run key, calls it with
the real `openai` client, whole and streamed, and the run ends with its spend and spans."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from harnesses.services import harness_create
from runs import services as run_services
from runs.executor import execute_run
from runs.models import Run
from sandboxes.gateway import GatewayThread
from tests.helpers.run_fixtures import sandbox_ports
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import INPUT_PRICE, MODEL, OUTPUT_PRICE
from tests.runs.helpers import containers_of, git_repo_of
from tests.traces.test_sdk_e2e import INSTALL, sdk_wheels, wheel_index  # noqa: F401
from traces.models import Span

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HARNESS = Path(__file__).resolve().parent / "covered_harness"
# Two calls answered with 5 words each: 11 prompt tokens and 5 completion tokens a call.
COST = 2 * (PROMPT_TOKENS * INPUT_PRICE + 5 * OUTPUT_PRICE) // 1_000_000


@pytest.fixture
def router_for_sandboxes(settings, router_url):
    """The uvicorn-served platform, reached by sandboxes through the sandbox gateway."""
    gateway = GatewayThread(
        host=settings.BELVEDIR_SANDBOX_GATEWAY,
        ports=sandbox_ports(),
        upstream=router_url.removesuffix("/api/v1"),
    )
    settings.BELVEDIR_SANDBOX_BASE_URL = gateway.url
    settings.BELVEDIR_SANDBOX_MEMORY = "2g"
    settings.BELVEDIR_RUN_TIMEOUT = 600
    yield gateway.url
    gateway.stop()


def test_a_covered_run_calls_the_router_with_the_openai_client_and_ends_with_its_spend(
    owner,
    covered_model,
    upstream,
    router_for_sandboxes,
    wheel_index,  # noqa: F811
    tmp_path,
    django_capture_on_commit_callbacks,
):
    harness = harness_create(
        project=owner.project,
        name="covered",
        repo_url=git_repo_of(HARNESS, tmp_path / "covered-harness"),
        install_command=INSTALL,
        run_command=".venv/bin/python run.py",
        env={
            "PIP_FIND_LINKS": wheel_index,
            "PIP_NO_INDEX": "1",
            "PIP_TRUSTED_HOST": django_settings.BELVEDIR_SANDBOX_GATEWAY,
        },
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_services.run_launch(
            project=owner.project, harness=harness, created_by=owner.user, model=MODEL
        )
    assert (
        run.covered and run.covered_cap_micros == django_settings.BELVEDIR_COVERED_SPEND_CAP_MICROS
    )

    execute_run(run.pk)

    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert containers_of(run.pk) == []
    assert run.results["answers"] == ["w0 w1 w2 w3 w4", "w0 w1 w2 w3 w4"]
    assert run.results["refused"] == "model_not_found"
    assert run.results["base"] == f"{router_for_sandboxes}/api/v1"
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    assert [r["model"] for r in upstream.requests] == [MODEL, MODEL]
    calls = Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros")
    assert calls.count() == 3  # the whole, the streamed and the refused call
    assert sorted(calls.values_list("status_code", flat=True)) == ["error", "ok", "ok"]
    assert all(s.session.external_id == run.pk for s in calls)


ANTHROPIC_HARNESS = Path(__file__).resolve().parent / "anthropic_harness"


def test_a_covered_anthropic_run_calls_the_messages_api_through_the_router_from_the_sandbox(
    owner,
    covered_model,
    upstream,
    router_for_sandboxes,
    tmp_path,
    django_capture_on_commit_callbacks,
):
    """What claude-code does with the ANTHROPIC_* it is given, from a gVisor sandbox: Claude Code
    itself is downloaded at install time, so a standard-library client stands in for it."""
    from models_registry.models import CoveredModel, Lab

    lab = Lab.objects.create(name="Anthropic", slug="anthropic", vendor_prefixes="anthropic")
    CoveredModel.objects.create(
        model_id="anthropic/claude-fake-4.5",
        display_name="Claude (fake)",
        lab=lab,
        input_price_micros=INPUT_PRICE,
        output_price_micros=OUTPUT_PRICE,
        max_output_tokens=100,
    )
    harness = harness_create(
        project=owner.project,
        name="anthropic",
        repo_url=git_repo_of(ANTHROPIC_HARNESS, tmp_path / "anthropic-harness"),
        install_command="true",
        run_command="python3 run.py",
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            model="anthropic/claude-fake-4.5",
        )
    assert run.covered

    execute_run(run.pk)

    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["answers"] == ["w0 w1 w2 w3 w4", "w0 w1 w2 w3 w4"]
    assert run.results["events"][0] == "message_start"
    assert run.results["events"][-2:] == ["message_delta", "message_stop"]
    assert run.results["base"] == f"{router_for_sandboxes}/api"
    assert "sk-upstream-operator" not in run.results["env_values"]
    assert [(seen["path"], seen["authorization"]) for seen in upstream.seen] == [
        ("/v1/messages", "Bearer sk-upstream-operator")
    ] * 2
    assert [r["model"] for r in upstream.requests] == ["anthropic/claude-fake-4.5"] * 2
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    calls = Span.objects.filter(run=run, attributes__has_key="belvedir.router.cost_micros")
    assert sorted(calls.values_list("attributes__belvedir.router.streamed", flat=True)) == [
        False,
        True,
    ]
    assert {s.model for s in calls} == {"anthropic/claude-fake-4.5"}
    assert all(s.session.external_id == run.pk for s in calls)
    assert {(s.input_tokens, s.output_tokens) for s in calls} == {(PROMPT_TOKENS, 5)}
