"""Trace fixtures: a running run with its per-run key, the SDK's captured session and another
organization's session (helpers are in tests/traces/helpers.py)."""

import pytest

from belvedir.models import ApiKey
from belvedir.services import api_key_create
from runs.models import Run
from tests.helpers.run_fixtures import serve_to_sandboxes
from tests.traces.fake_openai import DEFAULT_REPLY, FakeOpenAI
from tests.traces.helpers import body_of, fixture_bytes, post_outcome, post_traces, span
from traces.models import Session
from traces.services.task_forming import tasks_form


@pytest.fixture
def running_run(owner, harness):
    """A running run of the owner's harness, with its per-run key (`.key`), as launched."""
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        status="running",
        created_by=owner.user,
    )
    run.ingest_key, run.key = api_key_create(
        project=owner.project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.save(update_fields=["ingest_key"])
    return run


@pytest.fixture
def capture(owner) -> Session:
    """The SDK's captured flush, its outcome, its tasks formed."""
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_outcome(owner.key, {"session_id": "run_capture_1", "outcome": "success"})
    session = Session.objects.get(project=owner.project, external_id="run_capture_1")
    tasks_form(session=session)
    return session


@pytest.fixture
def foreign(outsider) -> Session:
    """A session (with a task group) in another organization."""
    post_traces(
        outsider.key,
        body_of(
            span(
                "secret.workflow",
                attributes={"session.id": "globex-secret", "traceloop.span.kind": "workflow"},
            )
        ),
    )
    session = Session.objects.get(project=outsider.project)
    tasks_form(session=session)
    return session


@pytest.fixture
def sandbox_openai():
    """The model provider (the fake's DEFAULT_REPLY), where sandboxes reach it."""
    fake = serve_to_sandboxes(
        lambda host, port: FakeOpenAI(reply=DEFAULT_REPLY, host=host, port=port)
    )
    with fake:
        yield fake
