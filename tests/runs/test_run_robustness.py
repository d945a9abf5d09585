"""Runs tell the truth under stress: floods of output, database blips, harnesses that try to
fake the platform's notes, odd results.json files, and a Docker engine that is down."""

import pytest
from django.db import connection

from belvedir.errors import Unavailable
from runs import services
from runs.contract import RUN_STAGE_LINE
from runs.executor import execute_run
from runs.models import Run
from tests.runs.helpers import Background, closed_port, containers_of, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

FLOOD = 8 * 1024 * 1024


def run_it(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.is_terminal, run.status
    assert containers_of(run.pk) == []
    return run


def scripted(launch, script: str, **launch_args) -> Run:
    """Launch a harness whose whole run command is `script` (no install step)."""
    return launch(harness={"install_command": "true", "run_command": script}, **launch_args)


def test_the_end_of_an_8_mb_flood_is_in_the_tail_and_the_log_size_is_exact(
    sandbox_settings, launch
):
    run = run_it(
        scripted(
            launch,
            f"head -c {FLOOD} /dev/zero | tr '\\0' x; echo; echo END-MARKER; "
            """echo '{"score": 1}' > results.json""",
        )
    )
    assert run.status == "succeeded", (run.notes, run.log_tail[-300:])
    assert run.log_tail.endswith("xxx\nEND-MARKER\n")
    assert run.log_size == len(f"{RUN_STAGE_LINE}\n") + FLOOD + len("\nEND-MARKER\n")
    assert len(run.log_tail.encode()) == 16 * 1024


def backend_pids() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


def test_a_run_survives_its_worker_losing_the_database_connection_mid_run(
    sandbox_settings, launch, caplog
):
    run = launch(env={"SLEEP": "6"})
    before = backend_pids()
    worker = Background(run.pk)
    wait_for(lambda: "tick 1" in Run.objects.get(pk=run.pk).log_tail, 30, "the run to be ticking")
    workers = backend_pids() - before  # the executor's connection and its heartbeat's
    assert workers, "the worker has no database connection of its own"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s) AS pid", [list(workers)])
        assert all(done for (done,) in cursor.fetchall())

    assert worker.join(timeout=60) == "succeeded"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.score == pytest.approx(0.85), run.notes
    assert "done" in run.log_tail and run.notes == []
    assert any("reconnecting" in r.getMessage() for r in caplog.records), "no call hit the blip"


@pytest.mark.parametrize("written", ["tasks", "install", "tasks 0123456789abcdef"])
def test_a_harness_writing_the_stage_file_cannot_fake_the_platforms_notes(
    sandbox_settings, launch, written
):
    run = run_it(
        scripted(launch, f"printf '{written}' > /workspace/.belvedir/stage; exit 4", tasks="t\n")
    )
    assert run.status == "failed" and run.exit_code == 4
    assert run.notes == ["belvedir: the run command exited with code 4."]


def test_a_tasks_download_failure_is_still_told_apart(sandbox_settings, launch):
    sandbox_settings.BELVEDIR_SANDBOX_BASE_URL = f"http://127.0.0.1:{closed_port()}"
    run = run_it(scripted(launch, "echo harness ran", tasks="t\n"))
    assert run.status == "failed" and run.exit_code == 97
    assert run.notes == [
        "belvedir: the Tasks file could not be downloaded, so the run did not start."
    ]
    assert "harness ran" not in run.log_tail


@pytest.mark.parametrize(
    "make, what",
    [
        ("mkdir results.json", "a directory"),
        ("mkfifo results.json", "a FIFO (named pipe)"),
        ("ln -s /etc/hostname results.json", "a symlink"),
    ],
)
def test_a_results_json_that_is_not_a_file_says_so(sandbox_settings, launch, make, what):
    run = run_it(scripted(launch, make))
    assert run.status == "failed" and run.exit_code == 0 and run.score is None
    note = f"belvedir: results.json is {what}, not a file."
    assert run.notes == [note]
    assert note in run.log_tail


def test_a_launch_while_the_docker_engine_is_down_is_refused_and_not_counted(
    owner, make_harness, settings, monkeypatch
):
    settings.BELVEDIR_RUNS_PER_DAY_CAP = 1
    harness = make_harness(name="engine down")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    refused = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert refused.status_code == 503, refused.content
    assert refused.json()["code"] == "unavailable"
    assert "sandbox engine is not answering" in refused.json()["detail"]
    assert refused.headers["Retry-After"] == "60"
    assert Run.objects.count() == 0
    with pytest.raises(Unavailable):
        services.run_launch(project=owner.project, harness=harness)

    monkeypatch.undo()  # the engine is back
    launched = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert launched.status_code == 201, "the refused launches used up the day's one run"
    capped = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert capped.status_code == 429 and capped.json()["code"] == "cap_daily"


def test_a_run_survives_losing_its_database_connection_just_before_the_finish_write(
    sandbox_settings, launch, monkeypatch, caplog
):
    from django.db import connections

    from runs import executor

    real_finish = executor.run_finish
    killed: list[int] = []

    def finish_after_a_blip(**fields):
        if not killed:  # once: the worker's own connection dies right before its finish write
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                (pid,) = cursor.fetchone()
            other = connections.create_connection("default")
            try:
                with other.cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
                    assert cursor.fetchone() == (True,)
            finally:
                other.close()
            killed.append(pid)
        return real_finish(**fields)

    monkeypatch.setattr(executor, "run_finish", finish_after_a_blip)
    run = launch()

    assert Background(run.pk).join(timeout=90) == "succeeded"
    run.refresh_from_db()
    assert killed, "the finish write never ran"
    assert run.status == "succeeded" and run.score == pytest.approx(0.85), run.notes
    assert run.notes == [] and run.finished_at is not None
    assert any("reconnecting" in r.getMessage() for r in caplog.records), "no call hit the blip"
