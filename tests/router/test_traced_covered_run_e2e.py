"""End to end: a covered run whose harness uses the real belvedir SDK (OpenLLMetry's openai
instrumentation, which sends the router a W3C `traceparent`) calling the router through the
sandbox gateway. Each call is seen twice, by the SDK's span and the router's; the session, its
page, the run's trace summary and the API count it once, with the router's tokens, and show
the model under test though its judge was called last."""

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from harnesses.services import harness_create
from models_registry.models import CoveredModel
from runs import services as run_services
from runs.executor import execute_run
from runs.models import Run
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import MODEL
from tests.router.test_covered_run_e2e import router_for_sandboxes  # noqa: F401
from tests.runs.helpers import git_repo_of
from tests.traces.test_sdk_e2e import INSTALL, sdk_wheels, wheel_index  # noqa: F401
from traces.models import Session, Span
from traces.selectors import run_trace_summary

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

HARNESS = Path(__file__).resolve().parent / "traced_covered_harness"
JUDGE = "fakelab/judge"
CALLS = 3  # the model twice, then the judge
TOKENS = CALLS * (PROMPT_TOKENS + 5)  # the fake upstream answers 5 words


def test_a_call_the_sdk_and_the_router_both_trace_counts_once_with_the_routers_tokens(
    owner,
    covered_model,
    upstream,
    router_for_sandboxes,  # noqa: F811
    wheel_index,  # noqa: F811
    tmp_path,
    django_capture_on_commit_callbacks,
):
    CoveredModel.objects.create(
        model_id=JUDGE,
        display_name="Fake judge",
        lab=covered_model.lab,
        input_price_micros=covered_model.input_price_micros,
        output_price_micros=covered_model.output_price_micros,
        max_output_tokens=covered_model.max_output_tokens,
    )
    harness = harness_create(
        project=owner.project,
        name="traced covered",
        repo_url=git_repo_of(HARNESS, tmp_path / "traced-covered-harness"),
        install_command=INSTALL,
        run_command=".venv/bin/python run.py",
        env={
            "PIP_FIND_LINKS": wheel_index,
            "PIP_NO_INDEX": "1",
            "PIP_TRUSTED_HOST": django_settings.BELVEDIR_SANDBOX_GATEWAY,
            "JUDGE": JUDGE,
        },
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            model=MODEL,
            judge_model=JUDGE,
        )

    execute_run(run.pk)

    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.results["usage"] == [PROMPT_TOKENS + 5] * CALLS
    session = Session.objects.get(project=owner.project, external_id=run.pk)
    llm = list(Span.objects.filter(session=session, is_llm=True))
    router = [s for s in llm if s.from_router]
    client = [s for s in llm if not s.from_router]
    assert len(router) == len(client) == CALLS  # both kept
    assert (session.llm_call_count, session.total_tokens) == (CALLS, TOKENS)
    # Paired by the traceparent the SDK sent: each router span under its SDK span.
    by_id = {s.span_id: s for s in client}
    for span in router:
        assert by_id[span.parent_span_id].trace_id == span.trace_id
        assert by_id[span.parent_span_id].duplicate_of_id == span.pk
    assert session.input_tokens == sum(s.input_tokens for s in router)
    assert session.model == MODEL  # the model under test, not the judge called last

    page = owner.web.get(f"/traces/sessions/{session.pk}/").content.decode()
    assert f'<strong id="llm-call-count">{CALLS}</strong> LLM calls' in page
    assert page.count(">duplicate</span>") == CALLS  # the SDK's spans, shown, not counted
    listing = owner.web.get(f"/traces/?run={run.pk}").content.decode()
    assert f"<td>{MODEL}</td>" in listing and f"<td>{JUDGE}</td>" not in listing
    summary = run_trace_summary(run)
    assert (summary["llm_calls"], summary["tokens"]) == (CALLS, TOKENS)  # the compare page's

    answer = owner.api.get(f"/api/v1/sessions/{session.pk}").json()
    assert (answer["model"], answer["llm_call_count"], answer["total_tokens"]) == (
        MODEL,
        CALLS,
        TOKENS,
    )
    assert len(answer["llm_calls"]) == CALLS
    assert sorted(c["model"] for c in answer["llm_calls"]) == sorted([MODEL, MODEL, JUDGE])
