"""End to end: a covered run of the Node harness (examples/node-harness: the `belvedir` npm
package the sandbox image carries and the `openai` npm client) calling the router through the
sandbox gateway, in the Docker sandbox, offline. Each call is seen twice, by the Node SDK's LLM
span and by the router's; the router's continues the W3C traceparent the SDK's wrapped fetch
sent, so the pair is made by trace context (issue 16's rule, traces/services/ingest.py): the
router's span under the SDK's, the SDK's marked its duplicate, the call counted once with the
router's tokens."""

import pytest

from harnesses.services import harness_create
from runs import services as run_services
from runs.executor import execute_run
from runs.models import Run
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import MODEL
from tests.router.test_covered_run_e2e import router_for_sandboxes  # noqa: F401
from tests.runs.helpers import containers_of, git_repo_of
from tests.traces.test_node_harness_e2e import (  # noqa: F401
    HARNESS,
    INSTALL,
    RUN,
    npm_registry,
    npm_tarballs,
)
from traces.models import Session, Span

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

CALLS = 2  # the harness's two questions
WORDS = 5  # the fake upstream's answer


def test_a_node_harness_call_the_sdk_and_the_router_both_trace_is_paired_by_its_traceparent(
    owner,
    covered_model,
    upstream,
    router_for_sandboxes,  # noqa: F811
    npm_registry,  # noqa: F811
    tmp_path,
    django_capture_on_commit_callbacks,
):
    harness = harness_create(
        project=owner.project,
        name="node covered",
        repo_url=git_repo_of(HARNESS, tmp_path / "node-harness"),
        install_command=INSTALL,
        run_command=RUN,
        env={"npm_config_registry": npm_registry, "npm_config_update_notifier": "false"},
        created_by=owner.user,
    )
    with django_capture_on_commit_callbacks(execute=False):
        run = run_services.run_launch(
            project=owner.project, harness=harness, created_by=owner.user, model=MODEL
        )
    assert run.model_covered

    execute_run(run.pk)

    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert containers_of(run.pk) == []
    assert run.results["outcome_reported"] is True, run.log_tail
    assert len(upstream.requests) == CALLS  # through the router, to the operator's upstream
    session = Session.objects.get(project=owner.project, external_id=run.pk)
    llm = list(Span.objects.filter(session=session, is_llm=True))
    router = [s for s in llm if s.from_router]
    client = [s for s in llm if not s.from_router]
    assert len(router) == len(client) == CALLS, [(s.name, s.from_router) for s in llm]
    # The Node SDK's spans: its `chat <model>` LLM spans, each inside its task's workflow.
    assert {s.name for s in client} == {f"chat {MODEL}"}
    # Paired by trace context: each router span is the child of one SDK span, in its trace,
    # and that SDK span is stored as the router span's duplicate.
    by_id = {s.span_id: s for s in client}
    assert sorted(s.parent_span_id for s in router) == sorted(by_id)
    for span in router:
        twin = by_id[span.parent_span_id]
        assert twin.trace_id == span.trace_id
        assert twin.duplicate_of_id == span.pk
        assert span.duplicate_of_id is None
    # Counted once, with the router's tokens.
    assert session.llm_call_count == CALLS
    assert session.total_tokens == CALLS * (PROMPT_TOKENS + WORDS)
    assert session.input_tokens == sum(s.input_tokens for s in router)
    assert session.model == MODEL
