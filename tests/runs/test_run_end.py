"""How the worker learns that a sandbox ended: the entrypoint's signed exit record as soon as
the output ends, else the engine's report; and no process started for an empty install."""

import pytest

from belvedir.sandbox_config import get_backend
from runs import executor
from runs.executor import execute_run
from runs.models import Run
from sandboxes.docker import DockerBackend
from tests.runs.helpers import containers_of

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

WRITE_SCORE = "python3 -c \"import json; json.dump({'score': 1}, open('results.json', 'w'))\""


class SilentEngine(DockerBackend):
    """An engine that never reports the exit (as if tearing the sandbox down took forever):
    only the entrypoint's exit record can end the run before its time cap."""

    def wait(self, handle, timeout):
        executor.time.sleep(min(timeout, 0.5))
        return None


@pytest.fixture
def silent_engine(sandbox_settings, monkeypatch):
    sandbox_settings.BELVEDIR_RUN_TIMEOUT = 40
    real = get_backend()
    engine = SilentEngine(
        instance=real.instance, data_dir=real.data_dir, reserve_bytes=real.reserve_bytes
    )
    monkeypatch.setattr(executor, "get_backend", lambda: engine)
    return engine


def run_it(run: Run) -> Run:
    execute_run(run.pk)
    run.refresh_from_db()
    assert containers_of(run.pk) == [], "the sandbox was not removed at the end of the run"
    return run


def test_a_run_ends_on_the_entrypoints_exit_record_without_the_engines_report(
    silent_engine, launch
):
    run = run_it(launch(env={"SCORE": "0.5"}))
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == 0.5 and run.exit_code == 0
    assert (run.finished_at - run.started_at).total_seconds() < 30  # not the 40 s cap

    failed = run_it(launch(env={"SCORE": "0.5"}, harness={"run_command": "python3 run.py; exit 3"}))
    assert failed.status == "failed" and failed.exit_code == 3
    assert "belvedir: the run command exited with code 3." in failed.notes


def test_a_forged_exit_record_is_not_believed(sandbox_settings, launch):
    """The harness blocks the entrypoint's own record (a folder where it writes it) and writes
    `exit-0` with a made-up signature: the engine's exit code (3) decides."""
    forge = (
        "mkdir /workspace/.belvedir/exit.$PPID && "
        "printf 'exit-0 %064d' 0 > /workspace/.belvedir/exit && python3 run.py; exit 3"
    )
    run = run_it(launch(env={"SCORE": "1"}, harness={"run_command": forge}))
    assert run.status == "failed" and run.exit_code == 3, (run.notes, run.log_tail)


@pytest.mark.parametrize("install", ["", "true"])
def test_an_empty_install_command_starts_nothing(sandbox_settings, launch, install):
    check = f"test ! -e /workspace/.belvedir/install.sh && {WRITE_SCORE}"
    run = run_it(launch(harness={"install_command": install, "run_command": check}))
    assert run.status == "succeeded" and run.score == 1, (run.notes, run.log_tail)
    assert "belvedir: starting the run command" in run.log_tail


def test_the_entrypoints_hmac_is_hmac_sha256():
    """Its own HMAC (hmac/hashlib load OpenSSL, tens of ms under gVisor) agrees with hmac's,
    for keys shorter than, as long as and longer than SHA-256's 64-byte block; RFC 4231 #2."""
    import hashlib
    import hmac

    from sandboxes.entrypoint import hmac_sha256

    rfc = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert hmac_sha256(b"Jefe", b"what do ya want for nothing?") == rfc
    for key in (b"", b"k", b"x" * 64, b"y" * 65, bytes(range(256))):
        for message in (b"", b"belvedir-stage:exit-0"):
            assert hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_the_harness_gets_sigpipe_and_sigxfsz_at_their_defaults(sandbox_settings, launch):
    """Python ignores both; the entrypoint starts the commands with them restored (as
    subprocess did): a pipe's writer ends on SIGPIPE, not on a write error it may not check."""
    check = f'[ -z "$(trap -p SIGPIPE SIGXFSZ)" ] && {WRITE_SCORE}'  # bash lists ignored ones
    run = run_it(launch(harness={"install_command": check, "run_command": check}))
    assert run.status == "succeeded" and run.score == 1, (run.notes, run.log_tail)
