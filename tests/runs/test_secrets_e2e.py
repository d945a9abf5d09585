"""Secret harness env values reach the sandbox and nowhere else: not the log, results, notes,
the API or the pages (real Docker)."""

import pytest
from django.db import connection

from runs import contract
from runs.executor import execute_run
from runs.models import Run

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

TOKEN = "svc-token-4f1d9a7c2e8b-do-not-leak"
# A quote, a backslash and a non-ASCII letter: JSON escapes all three.
PASSWORD = 'pa"55\\wörd-7b2e91c4-do-not-leak'


def test_secret_harness_env_is_redacted_from_log_results_notes_api_and_pages(
    sandbox_settings, launch, owner
):
    run = launch(
        # The harness prints both secrets, and reports the password as its model in
        # results.json, which the platform quotes in a note.
        env={"SERVICE_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD, "REPORT_MODEL": "$DB_PASSWORD"},
        harness={
            "run_command": 'echo "token=$SERVICE_TOKEN"; echo "pw=$DB_PASSWORD" >&2; python3 run.py'
        },
        model="acme/model-1",
        model_api_key="sk-model-key-e2e",
    )
    assert contract.run_harness_env(run)["SERVICE_TOKEN"] == TOKEN
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert "token=[redacted]" in run.log_tail and "pw=[redacted]" in run.log_tail
    assert run.results["model_reported"] == "[redacted]"
    assert any("reported model '[redacted]'" in n for n in run.notes), run.notes
    for response in [
        owner.api.get(f"/api/v1/runs/{run.pk}"),
        owner.api.get("/api/v1/runs"),
        owner.api.get(f"/api/v1/runs/{run.pk}/log", {"offset": 0}),
        owner.api.get(f"/api/v1/harnesses/{run.harness_id}"),
        owner.web.get(f"/runs/{run.pk}/"),
        owner.web.get(f"/harnesses/{run.harness_id}/"),
    ]:
        assert response.status_code == 200
        body = response.content.decode()
        assert TOKEN not in body and PASSWORD not in body
    with connection.cursor() as cursor:
        cursor.execute("SELECT r::text FROM runs_run r WHERE id = %s", [run.pk])
        (row,) = cursor.fetchone()
        assert TOKEN not in row and PASSWORD not in row, "a secret is stored in plaintext"
    assert Run.objects.get(pk=run.pk).harness_snapshot["env"] == {"REPORT_MODEL": "$DB_PASSWORD"}
