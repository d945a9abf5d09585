"""Trace fixtures: a running run with its per-run key (helpers are in tests/traces/helpers.py)."""

import pytest

from belvedir.models import ApiKey
from belvedir.services import api_key_create
from runs.models import Run


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
