"""A run whose trace export failed says so: the SDK's "spans dropped" line in its output, or a
call's span the router could not store, marks it `traces_incomplete` (the API) and puts a
warning badge on its page, instead of a plain "succeeded" over a short trace."""

import pytest

from runs.executor import execute_run
from runs.models import Run

BADGE = 'id="run-traces-incomplete"'


def shown(owner, run: Run) -> tuple[bool, str]:
    """The API's flag and the run page, as the owner sees them (the router's case is in
    tests/router/test_settlement.py)."""
    answer = owner.api.get(f"/api/v1/runs/{run.pk}")
    assert answer.status_code == 200
    page = owner.web.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    return answer.json()["traces_incomplete"], page.content.decode()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_sdk_dropped_its_spans_is_flagged_with_a_badge(sandbox_settings, launch, owner):
    # The harness traces with the real belvedir SDK to an address nothing answers in the
    # sandbox: its exporter logs "trace export failed: ...; spans dropped.".
    run = launch(env={"TRACE_TO": "http://127.0.0.1:9"})
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert "spans dropped" in run.log_tail
    assert run.traces_incomplete
    flag, page = shown(owner, run)
    assert flag is True and BADGE in page and "traces incomplete" in page
    # A run that said nothing of the kind is not flagged.
    plain = launch(env={})
    execute_run(plain.pk)
    plain.refresh_from_db()
    assert plain.status == "succeeded" and not plain.traces_incomplete
    flag, page = shown(owner, plain)
    assert flag is False and BADGE not in page
