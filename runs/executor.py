"""Execute one run in a sandbox, in four steps: prepare, start, follow, finish.

- prepare: clone the repo on the worker's side (credentials never enter the sandbox) and
  build the sandbox spec: the workspace archive (the repo and the control files), the
  contract env, the limits from settings;
- start: launch the sandbox and record it on the run;
- follow: stream its output into the log tail, to the very last byte, while waiting for it
  to end, under the time cap, unless the run is cancelled or reaped meanwhile;
- finish: collect the stage marker and results.json, judge them, record the outcome.

Every Run write goes through `runs.services`; the database calls here survive a dropped
connection (`belvedir.db.reconnecting`).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections

from belvedir import git
from belvedir.db import reconnecting
from belvedir.gpu_host import gpu_sandbox, sandbox_status
from belvedir.sandbox_config import engine_name, get_backend, spec_from_settings
from belvedir.text import size_text
from harnesses import drivers, install_cache, managed
from harnesses.repos import clone_repo
from runs import contract, gpu
from runs.contract import run_model_secrets, run_secret_values
from runs.heartbeat import Heartbeat
from runs.logtail import LogTail, pump
from runs.models import GpuDevice, Run, Stage, Status
from runs.room import launch_when_room
from runs.services import (
    run_claim,
    run_finish,
    run_mark_running,
    run_stage_advance,
    run_store_log,
)
from sandboxes import entrypoint
from sandboxes.base import (
    LABEL_RUN_ID,
    Collected,
    FileKind,
    SandboxBackend,
    SandboxError,
    SandboxHandle,
    SandboxSpec,
    tar_directory,
)

log = logging.getLogger(__name__)
GPU_POLL_SECONDS = 1.0  # how often a GPU run's worker looks for a free device
# After the sandbox stopped, how long the rest of its output may take to arrive.
DRAIN_SECONDS = 120.0
ENTRYPOINT_SOURCE = Path(entrypoint.__file__)
RESULTS_FILE = f"{contract.REPO_DIR}/results.json"
# The entrypoint's markers for a results.json the engine may not see (gVisor keeps them inside).
HIDDEN_KINDS = {
    "results-fifo": FileKind.FIFO,
    "results-socket": FileKind.SOCKET,
    "results-device": FileKind.DEVICE,
}


@reconnecting
def _load(run_id: str) -> Run:
    return Run.objects.get(pk=run_id)


@reconnecting
def _status(run_id: str) -> str | None:
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


def sandbox_image(snapshot: dict) -> dict[str, str]:
    """The run sandbox's image when it is not the sandbox image: a Harbor harness (the served
    Harbor driver or a Harbor card) runs in BELVEDIR_HARBOR_IMAGE, which has Harbor."""
    if managed.is_harbor(repo_url=snapshot.get("repo_url", ""), preset=snapshot.get("preset", "")):
        return {"image": settings.BELVEDIR_HARBOR_IMAGE}
    return {}


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@reconnecting
def _gpu_type(run_id: str) -> str:
    return Run.objects.filter(pk=run_id).values_list("gpu_type", flat=True).first() or ""


def wait_for_device(run_id: str, gpu_type: str) -> GpuDevice | None:
    """A device of the run's type on this host, held by the run: waits while all are busy and
    the run is still queued (None once it is not: cancelled, or claimed by another worker)."""
    if gpu_type not in gpu.host_devices():
        log.error(
            "run %s needs %s but this worker has no such GPU (BELVEDIR_GPU_TYPES); left queued",
            run_id,
            gpu.with_article(gpu_type),
        )
        return None
    while _status(run_id) == Status.QUEUED:
        device = gpu.device_claim(run_id=run_id, gpu_type=gpu_type)
        if device is not None:
            return device
        time.sleep(GPU_POLL_SECONDS)
    return None


def execute_run(run_id: str) -> str:
    """Run it if it is still queued; safe to call twice (the claim is atomic). A GPU run first
    waits for a free device of its type on this worker, holds it while it runs, then frees it."""
    gpu_type = _gpu_type(run_id)
    if not gpu_type:
        return _execute(run_id, None)
    device = wait_for_device(run_id, gpu_type)
    if device is None:
        return "not claimed"
    try:
        return _execute(run_id, device)
    finally:
        gpu.device_release(run_id=run_id, device_pk=device.pk)


def _execute(run_id: str, device: GpuDevice | None) -> str:
    gpu_device = f"{device.host}/{device.device_id}" if device else ""
    claimed = run_claim(
        run_id=run_id, worker=_worker_name(), gpu_device=gpu_device, engine=engine_name()
    )
    if not claimed:
        return "not claimed"
    try:
        run = _load(run_id)
        execution = Execution(run, get_backend(), device=device)
    except Exception as exc:  # claimed: it must not stay "running" until the reaper
        log.exception("run %s could not be prepared", run_id)
        note = f"belvedir: internal error while preparing the run ({exc.__class__.__name__})."
        run_finish(run_id=run_id, status=Status.FAILED, notes=[note], platform_failed=True)
        return Status.FAILED
    heartbeat = Heartbeat(
        run_id, execution.tail, gpu_device=device is not None, backend=execution.backend
    )
    heartbeat.start()
    execution.sandbox_started = heartbeat.sandbox_started
    workdir = Path(tempfile.mkdtemp(prefix=f"belvedir-{run_id}-"))
    try:
        return execution.execute(workdir)
    except SandboxError as exc:
        return execution.fail(f"belvedir: the sandbox failed: {exc}.", platform=True)
    except Exception as exc:  # nothing may leave a run stuck in "running"
        log.exception("run %s crashed", run_id)
        note = f"belvedir: internal error while running ({exc.__class__.__name__})."
        return execution.fail(note, platform=True)
    finally:
        heartbeat.stop()
        execution.clean_up()
        shutil.rmtree(workdir, ignore_errors=True)
        close_old_connections()


class Execution:
    """One run's way through the sandbox; `execute` takes the four steps in turn."""

    def __init__(self, run: Run, backend: SandboxBackend, device: GpuDevice | None = None):
        self.run = run
        self.backend = backend
        self.device = device
        self.secrets = run_model_secrets(run)
        self.tail = LogTail(run_secret_values(run))
        self.stage_key = secrets.token_hex(32)
        self.handle: SandboxHandle | None = None
        self.cache = install_cache.Plan()  # the install cache's part (prepare)
        self._waiter: threading.Thread | None = None
        self._stop_waiting = threading.Event()  # set: `follow` no longer needs the engine's wait
        self.sandbox_started: Callable[[], None] = lambda: None  # the heartbeat's, at launch

    def execute(self, workdir: Path) -> str:
        isolation = sandbox_status(self.run.gpu_type)  # a GPU run's: its host's GPU check too
        if not isolation.ok:  # it went away since the launch: no untrusted code runs now
            return self.fail(
                "belvedir: sandbox isolation is not in place on this worker "
                f"({'; '.join(isolation.problems)}), so the run did not start.",
                platform=True,
            )
        if self.run.model_base and self.run.fine_tuned_model_id is None:
            return self.fail(
                "belvedir: the run's fine-tuned model was deleted before the run started."
            )
        try:
            spec = self.prepare(workdir)
        except git.GitError as exc:
            return self.fail(f"belvedir: could not clone the repo: {exc}.")
        current = _status(self.run.pk)
        if current != Status.RUNNING:  # cancelled (or reaped) while we cloned
            return current or Status.FAILED
        if not self.start(spec):  # cancelled (or reaped) while it waited for room on the disk
            return _status(self.run.pk) or Status.FAILED
        exit_code = self.follow()
        self.cache.record(self.backend, self.handle, self.run.pk)  # its install's snapshot
        return self.finish(exit_code)

    # --- the steps ---------------------------------------------------------------------------

    def prepare(self, workdir: Path) -> SandboxSpec:
        """Clone the repo next to the control files in `workdir`; the spec that carries them."""
        run, snap = self.run, self.run.harness_snapshot
        commit = clone_repo(snap["repo_url"], snap.get("ref", ""), workdir / "repo")
        control = workdir / ".belvedir"
        control.mkdir()
        spec = spec_from_settings(
            run_id=run.pk,
            command=list(contract.COMMAND),
            env=contract.run_sandbox_env(run, secrets=self.secrets),
            workdir=contract.WORKSPACE,
            # A GPU run: its type's shape, device, runtime and image (belvedir.gpu_host).
            **(gpu_sandbox(run.gpu_type, self.device.device_id) if self.device else {})
            | sandbox_image(snap),
        )
        self.cache = install_cache.plan(run, commit, spec, self.backend, self.stage_key, control)
        install = (snap.get("install_command") or "").strip()
        if install not in ("", "true", ":") and not self.cache.reused:  # (entrypoint.py)
            (control / "install.sh").write_text(snap["install_command"] + "\n")
        (control / "run.sh").write_text(snap["run_command"] + "\n")
        (control / "entrypoint.py").write_text(ENTRYPOINT_SOURCE.read_text())
        (control / Path(contract.STAGE_KEY_FILE).name).write_text(self.stage_key)
        return self.cache.spec(spec, tar_directory(*self.cache.workspace(workdir)))

    def start(self, spec: SandboxSpec) -> bool:
        """Launch the run's sandbox; False if the run ended while it waited for room."""
        self.tail.write(f"{self.cache.note}\n" if self.cache.note else "")
        handle = launch_when_room(
            self.backend,
            spec,
            still_running=lambda: _status(self.run.pk) == Status.RUNNING,
            tail=self.tail,
        )
        if handle is None:
            return False
        self.handle = handle
        self.sandbox_started()
        run_mark_running(run_id=self.run.pk, container_id=self.handle.id)
        run_stage_advance(run_id=self.run.pk, stage=Stage.INSTALLING)
        return True

    def follow(self) -> int | None:
        """The exit code; None when the run was stopped (time cap, cancelled, reaped).

        Returns only once all of the output is in the tail. The end is the first of: the
        engine reports the exit, or the output ended and the entrypoint's signed exit code is
        there (the engine reports the exit only once it has torn the sandbox down, 0.1-0.2 s
        later). The record is written as the entrypoint returns, when the init process ends
        the sandbox with every process in it; `clean_up` kills and removes it in any case.
        """
        assert self.handle is not None
        handle = self.handle
        changed = threading.Event()  # the output ended, or the engine answered
        exited: list[int] = []
        failed: list[SandboxError] = []
        pumper = threading.Thread(
            target=self._pump, args=(changed,), daemon=True, name=f"log {self.run.pk}"
        )
        self._waiter = threading.Thread(
            target=self._wait,
            args=(exited, failed, changed),
            daemon=True,
            name=f"wait {self.run.pk}",
        )
        pumper.start()
        self._waiter.start()
        deadline = time.monotonic() + settings.BELVEDIR_RUN_TIMEOUT
        exit_code = None
        signed_looked = False
        try:
            while True:
                if exited:
                    exit_code = exited[0]
                    break
                if failed:
                    raise failed[0]
                if not pumper.is_alive() and not signed_looked:
                    signed_looked = True
                    exit_code = self._signed_exit()
                    if exit_code is not None:
                        break  # its first process returned: the sandbox is ending by itself
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if changed.wait(min(2.0, remaining)):
                    changed.clear()  # then look again: whatever set it has left its result
                elif _status(self.run.pk) != Status.RUNNING:
                    break  # cancelled, or reaped
        finally:
            self._stop_waiting.set()
            if exit_code is None:
                self.backend.kill(handle)
            pumper.join(timeout=DRAIN_SECONDS)
            if pumper.is_alive():
                log.warning("the output of run %s did not end; finishing without it", self.run.pk)
        return exit_code

    def _wait(self, exited: list[int], failed: list[SandboxError], changed: threading.Event):
        """The engine's word on the exit (in a thread of its own), until `follow` is done."""
        assert self.handle is not None
        try:
            while not self._stop_waiting.is_set():
                code = self.backend.wait(self.handle, timeout=2.0)
                if code is not None:
                    exited.append(code)
                    break
        except SandboxError as exc:
            if not self._stop_waiting.is_set():
                failed.append(exc)
        finally:
            changed.set()

    def _signed_exit(self) -> int | None:
        """The exit code the entrypoint recorded as it ended, if the record is its own."""
        assert self.handle is not None
        try:
            found = self.backend.collect(self.handle, [contract.EXIT_FILE], 256)
        except SandboxError:
            return None  # then the engine's word
        stage = self._marker(found[contract.EXIT_FILE])
        code = stage.removeprefix("exit-")
        return int(code) if stage.startswith("exit-") and code.isdigit() else None

    def finish(self, exit_code: int | None) -> str:
        """Judge what the sandbox left behind and record the outcome (once)."""
        assert self.handle is not None
        current = _status(self.run.pk)
        if current == Status.CANCELLED:
            run_store_log(run_id=self.run.pk, log_tail=self.tail.text(), log_size=self.tail.size)
            return Status.CANCELLED
        if current != Status.RUNNING:  # the reaper gave up on us; its verdict stands
            return current or Status.FAILED
        if exit_code is None:
            timeout = settings.BELVEDIR_RUN_TIMEOUT
            return self.fail(
                f"belvedir: the run took longer than its {timeout} s limit and was stopped."
            )

        exited = f"belvedir: the run command exited with code {exit_code}."
        if self.backend.disk_full(self.handle):
            quota = settings.BELVEDIR_SANDBOX_DISK / 2**30
            note = (
                f"belvedir: the sandbox reached its disk quota of {quota:.1f} GiB "
                "(BELVEDIR_SANDBOX_DISK); writes past it failed with 'No space left on device'."
            )
            return self.fail(note, *([exited] if exit_code else []), exit_code=exit_code)
        files = self.backend.collect(
            self.handle, [contract.STAGE_FILE, RESULTS_FILE], contract.RESULTS_MAX_BYTES
        )
        marker = self._marker(files[contract.STAGE_FILE])
        stage = marker if exit_code != 0 else ""
        if stage == "tasks":
            return self.fail(
                "belvedir: the Tasks file could not be downloaded, so the run did not start.",
                exit_code=exit_code,
                platform=True,  # fetched before any of the harness runs: the platform's part
            )
        if stage == "install":
            return self.fail(
                f"belvedir: the install command exited with code {exit_code}.",
                *self._driver_said(),
                exit_code=exit_code,
            )
        # Past the install: a failed run command stopped the run while running, else it is done.
        run_stage_advance(
            run_id=self.run.pk, stage=Stage.COLLECTING if exit_code == 0 else Stage.RUNNING
        )
        results = files[RESULTS_FILE]
        if results.kind is FileKind.MISSING and marker in HIDDEN_KINDS:
            results = Collected(HIDDEN_KINDS[marker])  # seen only inside the sandbox
        if results.kind not in (FileKind.FILE, FileKind.MISSING):
            note = f"belvedir: results.json is a {results.kind}, not a file."
            return self.fail(note, *([exited] if exit_code else []), exit_code=exit_code)
        if results.too_large:
            note = (
                f"belvedir: results.json is {results.size:,} bytes, over the "
                f"{size_text(contract.RESULTS_MAX_BYTES, iec=False)} limit."
            )
            return self.fail(note, *([exited] if exit_code else []), exit_code=exit_code)

        outcome = contract.judge_results(
            results.content, exit_code=exit_code, launch_model=self.run.model
        )
        if exit_code != 0:
            outcome.notes += [exited, *self._driver_said()]
        status = Status.SUCCEEDED if outcome.succeeded else Status.FAILED
        return self._record(status, outcome.notes, exit_code, outcome.score, outcome.results)

    # --- helpers -------------------------------------------------------------------------------

    def _driver_said(self) -> list[str]:
        """A served driver's last word on why it stopped, as a note (none for others)."""
        repo_url = (self.run.harness_snapshot or {}).get("repo_url", "")
        note = contract.driver_note(self.tail.text(), drivers.served_name(repo_url))
        return [note] if note else []

    def fail(self, *notes: str, exit_code: int | None = None, platform: bool = False) -> str:
        """End the run failed; `platform`: through the platform's fault (`Run.platform_failed`)."""
        return self._record(Status.FAILED, list(notes), exit_code, platform_failed=platform)

    def _record(
        self,
        status: str,
        notes: list[str],
        exit_code: int | None,
        score: float | None = None,
        results: dict | None = None,
        platform_failed: bool = False,
    ) -> str:
        # A note may quote the harness (the model it reported): secrets are redacted there too.
        shown = [self.tail.redact(note) for note in notes]
        for note in shown:
            self.tail.write(f"\n{note}")
        if shown:
            self.tail.write("\n")
        run_finish(
            run_id=self.run.pk,
            status=status,
            score=score,
            results=contract.redact_json(results, self.tail.secrets),
            notes=[*self.cache.notes, *shown],
            exit_code=exit_code,
            log_tail=self.tail.text(),
            log_size=self.tail.size,
            platform_failed=platform_failed,
            traces_incomplete=self.tail.spans_dropped,
        )
        return status

    def _marker(self, marker: Collected) -> str:
        """What the entrypoint recorded (a failed stage, a special results.json), if the
        marker is really its own; "" otherwise."""
        if marker.content is None:
            return ""
        text = marker.content.decode(errors="replace").strip()
        stage = text.partition(" ")[0]
        expected = contract.stage_marker(self.stage_key, stage)
        return stage if secrets.compare_digest(text.encode(), expected.encode()) else ""

    def _pump(self, ended: threading.Event | None = None) -> None:
        assert self.handle is not None
        try:
            pump(self.backend.stream_logs(self.handle), self.tail)
        except SandboxError as exc:
            log.warning("the output of run %s broke off: %s", self.run.pk, exc)
        finally:
            if ended is not None:
                ended.set()

    def clean_up(self) -> None:
        if self.handle is None:
            return
        self._stop_waiting.set()
        if self._waiter is not None:
            self._waiter.join(timeout=10)  # the sandbox was killed: its wait returns now
        try:
            self.backend.kill(self.handle)
            self.backend.remove(self.handle)
        except SandboxError:
            log.warning("could not remove the sandbox of %s; the reaper will", self.run.pk)
        # Every other container labelled with the run's id is on this engine too (a managed
        # Harbor run's task sandboxes): however the run ended (a cancel from a web host without
        # this engine, the reaper of another host), they go with it now, found in one call;
        # harbor stops their rows when the run ends and its reaper pass settles what is left.
        try:
            for info in self.backend.list_by_label({LABEL_RUN_ID: self.run.pk}):
                self.backend.remove(SandboxHandle(id=info.id, run_id=self.run.pk))
        except SandboxError:
            log.warning("could not remove the containers of %s; the reaper will", self.run.pk)
