"""Execute one run in a sandbox: clone, copy in, start, stream the log, wait, judge, clean up."""

import codecs
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

from runs import contract
from runs.models import Run, Stage, Status
from runs.sandbox.base import (
    SandboxError,
    SandboxFileTooLarge,
    SandboxHandle,
    SandboxSettings,
    get_backend,
    tar_directory,
)
from runs.services import (
    git_env,
    git_error_reason,
    run_claim,
    run_finish,
    run_harness_env,
    run_heartbeat,
    run_model_secrets,
    run_secret_values,
    run_stage_advance,
    without_credentials,
)

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 1.0
REDACTED = contract.REDACTED


class LogTail:
    """The last 16 KB of output with secrets redacted, and the count of characters ever output.

    Secrets are redacted as the output arrives, so `size` counts the redacted stream and the
    log API's offsets stay true. The end of a chunk that could be the start of a secret is
    held back until the next chunk shows whether it is one, so half a secret split across
    two chunks never shows either.
    """

    def __init__(self, secrets: list[str], limit: int = contract.LOG_TAIL_BYTES):
        self.secrets = contract.secrets_for_redaction(secrets)
        self.limit = limit
        self._text = ""  # redacted output, the last 2 x limit characters of it
        self._pending = ""  # the end of the output that may be the start of a secret
        self.size = 0
        self.lock = threading.Lock()
        self.dirty = False
        self.run_started = False  # the entrypoint's RUN_STAGE_LINE went by
        self._recent = "\n"  # the end of the output, enough to find that line across chunks

    def _held(self, text: str) -> int:
        """How many characters at the end of `text` begin some secret."""
        longest = max((len(s) for s in self.secrets), default=1) - 1
        for n in range(min(longest, len(text)), 0, -1):
            if any(secret.startswith(text[-n:]) for secret in self.secrets):
                return n
        return 0

    def _add(self, text: str) -> None:
        self._text = (self._text + text)[-self.limit * 2 :]
        self.size += len(text)
        if not self.run_started:
            line = f"\n{contract.RUN_STAGE_LINE}\n"
            window = self._recent + text
            self.run_started = line in window
            self._recent = window[-(len(line) - 1) :]

    def write(self, chunk: str) -> None:
        with self.lock:
            text = self.redact(self._pending + chunk)
            held = self._held(text)
            self._pending = text[len(text) - held :] if held else ""
            self._add(text[: len(text) - held])
            self.dirty = True

    def close(self) -> None:
        """The output ended: what was held back is just text."""
        with self.lock:
            self._add(self._pending)
            self._pending = ""

    def text(self) -> str:
        with self.lock:
            return contract.clip_log_tail(self._text, self.limit)

    def redact(self, text: str) -> str:
        return contract.redact_text(text, self.secrets)


class Heartbeat:
    """Beats (with the log tail when it changed) from the claim until the run is finished,
    so the reaper sees the worker alive through a long clone or copy too."""

    def __init__(self, run_id: str, tail: LogTail):
        self.run_id = run_id
        self.tail = tail
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"beat {run_id}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        stage_told = False
        try:
            while not self._stop.wait(HEARTBEAT_SECONDS):
                try:
                    close_old_connections()
                    if self.tail.run_started and not stage_told:
                        run_stage_advance(run_id=self.run_id, stage=Stage.RUNNING)
                        stage_told = True
                    dirty, self.tail.dirty = self.tail.dirty, False
                    if dirty:
                        run_heartbeat(
                            run_id=self.run_id, log_tail=self.tail.text(), log_size=self.tail.size
                        )
                    else:
                        run_heartbeat(run_id=self.run_id)
                except Exception:  # one failed beat (a dropped connection) must not end them all
                    log.warning("heartbeat of %s failed; trying again", self.run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()  # this thread's own connection; it would leak otherwise


def _still_running(run_id: str) -> bool:
    return Run.objects.filter(pk=run_id, status=Status.RUNNING).exists()


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _git(args: list[str], cwd: Path, timeout: float) -> None:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=git_env()
    )
    if done.returncode != 0:
        reason = git_error_reason(done.stderr, "failed")
        raise SandboxError(f"git {args[0]} failed: {reason}")


def clone_repo(repo_url: str, ref: str, dest: Path) -> None:
    """A shallow clone at the ref on the worker's side; credentials never enter the sandbox."""
    timeout = settings.BELVEDIR_CLONE_TIMEOUT
    dest.mkdir(parents=True)
    try:
        _git(["init", "-q"], dest, timeout)
        _git(["remote", "add", "origin", repo_url], dest, timeout)
        try:
            _git(["fetch", "-q", "--depth", "1", "origin", ref or "HEAD"], dest, timeout)
        except SandboxError:
            if not ref:
                raise
            _git(["fetch", "-q", "origin"], dest, timeout)  # a commit not fetchable by itself
            _git(["checkout", "-q", ref], dest, timeout)
        else:
            _git(["checkout", "-q", "FETCH_HEAD"], dest, timeout)
    except subprocess.TimeoutExpired:
        raise SandboxError(
            f"cloning {without_credentials(repo_url)} took longer than {timeout} s"
        ) from None
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file() and not f.is_symlink())
    if size > settings.BELVEDIR_REPO_MAX_BYTES:
        raise SandboxError(
            f"the repo is {size:,} bytes, over the {settings.BELVEDIR_REPO_MAX_BYTES:,} byte limit"
        )


def execute_run(run_id: str) -> str:
    """Run it if it is still queued; safe to call twice (the claim is atomic)."""
    if not run_claim(run_id=run_id, worker=_worker_name()):
        return "not claimed"
    run = Run.objects.get(pk=run_id)
    secrets = run_model_secrets(run)
    tail = LogTail(run_secret_values(run))
    backend = get_backend()
    handle: SandboxHandle | None = None
    workdir = Path(tempfile.mkdtemp(prefix=f"belvedir-{run_id}-"))
    notes: list[str] = []

    def fail(note: str, exit_code: int | None = None) -> str:
        note = tail.redact(note)
        tail.write(f"\n{note}\n")
        run_finish(
            run_id=run_id,
            status=Status.FAILED,
            notes=[*notes, note],
            exit_code=exit_code,
            log_tail=tail.text(),
            log_size=tail.size,
        )
        return Status.FAILED

    heartbeat = Heartbeat(run_id, tail)
    heartbeat.start()
    try:
        snap = run.harness_snapshot
        try:
            clone_repo(snap["repo_url"], snap.get("ref", ""), workdir / "repo")
        except SandboxError as exc:
            return fail(f"belvedir: could not clone the repo: {exc}.")
        shutil.rmtree(workdir / "repo" / ".git", ignore_errors=True)
        tasks = snap.get("tasks") or ""
        env = contract.sandbox_env(
            harness_env=run_harness_env(run),
            run_id=run.pk,
            run_key=secrets["run_key"],
            base_url=settings.BELVEDIR_SANDBOX_BASE_URL,
            tasks=tasks,
            attempts=run.attempts,
            grading=run.grading,
            model_settings={
                "MODEL": run.model,
                "MODEL_API_BASE": run.model_api_base,
                "MODEL_API_KEY": secrets["model_api_key"],
                "JUDGE_MODEL": run.judge_model,
                "JUDGE_API_BASE": run.judge_api_base,
                "JUDGE_API_KEY": secrets["judge_api_key"],
            },
        )
        sandbox = SandboxSettings.from_settings()
        handle = backend.create(
            run_id=run.pk,
            command=["bash", "-c", contract.ENTRYPOINT],
            env=env,
            workdir=contract.WORKSPACE,
            gpu=snap.get("compute") == "gpu",
            **sandbox.create_kwargs(),
        )
        Run.objects.filter(pk=run_id).update(container_id=handle.id)
        # The repo and the control files go in with one copy.
        control = workdir / ".belvedir"
        control.mkdir()
        (control / "install.sh").write_text((snap.get("install_command") or "true") + "\n")
        (control / "run.sh").write_text(snap["run_command"] + "\n")
        (control / "fetch_tasks.py").write_text(contract.FETCH_TASKS)
        (control / "stage").write_text("start")
        backend.put_files(handle, contract.WORKSPACE, tar_directory(workdir, "."))
        if not _still_running(run_id):  # cancelled (or reaped) while we cloned and copied
            return Run.objects.get(pk=run_id).status
        backend.start(handle)
        run_stage_advance(run_id=run_id, stage=Stage.INSTALLING)
        return _follow(run, backend, handle, tail, notes, fail)
    except SandboxError as exc:
        return fail(f"belvedir: the sandbox failed: {exc}.")
    except Exception as exc:  # nothing may leave a run stuck in "running"
        log.exception("run %s crashed", run_id)
        return fail(f"belvedir: internal error while running ({exc.__class__.__name__}).")
    finally:
        heartbeat.stop()
        if handle is not None:
            try:
                backend.kill(handle)
                backend.remove(handle)
            except SandboxError:
                log.warning("could not remove the sandbox of %s; the reaper will", run_id)
        shutil.rmtree(workdir, ignore_errors=True)
        close_old_connections()


def _follow(run: Run, backend, handle: SandboxHandle, tail: LogTail, notes: list[str], fail) -> str:

    def pump() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            for chunk in backend.stream_logs(handle):
                tail.write(decoder.decode(chunk))  # a character split across chunks stays whole
        except SandboxError:
            pass
        finally:
            tail.write(decoder.decode(b"", final=True))
            tail.close()

    pumper = threading.Thread(target=pump, daemon=True, name=f"log {run.pk}")
    pumper.start()
    timeout = settings.BELVEDIR_RUN_TIMEOUT
    deadline = time.monotonic() + timeout
    exit_code = None
    try:
        while exit_code is None and time.monotonic() < deadline:
            exit_code = backend.wait(
                handle, timeout=min(2.0, max(0.1, deadline - time.monotonic()))
            )
            if exit_code is None and not _still_running(run.pk):  # cancelled, or reaped
                backend.kill(handle)
                break
    finally:
        if exit_code is None:
            backend.kill(handle)
        pumper.join(timeout=5)

    current = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
    if current == Status.CANCELLED:
        Run.objects.filter(pk=run.pk).update(log_tail=tail.text(), log_size=tail.size)
        return Status.CANCELLED
    if current != Status.RUNNING:  # the reaper gave up on us; its verdict stands
        return current
    if exit_code is None:
        return fail(f"belvedir: the run took longer than its {timeout} s limit and was stopped.")

    stage = ""  # which step failed: only asked when something did
    if exit_code != 0:
        raw_stage = backend.read_file(handle, contract.STAGE_FILE, 64) or b""
        stage = raw_stage.decode(errors="replace").strip()
    if stage == "tasks":
        return fail(
            "belvedir: the Tasks file could not be downloaded, so the run did not start.", exit_code
        )
    if stage == "install" and exit_code != 0:
        return fail(f"belvedir: the install command exited with code {exit_code}.", exit_code)
    # Past the install: a failed run command stopped the run while running, else it is done.
    run_stage_advance(run_id=run.pk, stage=Stage.COLLECTING if exit_code == 0 else Stage.RUNNING)
    try:
        raw = backend.read_file(
            handle, f"{contract.REPO_DIR}/results.json", contract.RESULTS_MAX_BYTES
        )
    except SandboxFileTooLarge as exc:
        return fail(
            f"belvedir: results.json is {exc.size:,} bytes, over the 256 KB limit.", exit_code
        )
    outcome = contract.judge_results(raw, exit_code=exit_code, launch_model=run.model)
    if exit_code != 0:
        outcome.notes.append(f"belvedir: the run command exited with code {exit_code}.")
    # A note may quote the harness (the model it reported): secrets are redacted there too.
    all_notes = [tail.redact(note) for note in (*notes, *outcome.notes)]
    for note in all_notes:
        tail.write(f"\n{note}")
    if all_notes:
        tail.write("\n")
    status = Status.SUCCEEDED if outcome.succeeded else Status.FAILED
    run_finish(
        run_id=run.pk,
        status=status,
        score=outcome.score,
        results=_redact_results(outcome.results, tail),
        notes=all_notes,
        exit_code=exit_code,
        log_tail=tail.text(),
        log_size=tail.size,
    )
    return status


def _redact_results(results, tail: LogTail):
    """Every string in the results (keys too) redacted; a secret with a quote, backslash or
    non-ASCII character is found as written, not as JSON would escape it."""
    return contract.redact_json(results, tail.secrets)
