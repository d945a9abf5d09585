"""The platform's task-sandbox API (docs/task-sandboxes.md), with the standard library only.

`TaskSandboxes` talks to `{BELVEDIR_BASE_URL}/api/v1` with the run's key (`BELVEDIR_API_KEY`):
build and start a task sandbox from an `environment/` directory, exec with streamed output,
upload and download tar archives, stop. Blocking calls: the Harbor environment runs them in
threads. Kept free of Harbor imports so the host's tests exercise it directly.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CREATE_TIMEOUT = 3600  # a build can take minutes (the platform caps it, 1800 s by default)
READ_TIMEOUT = 120  # per socket read; exec streams a heartbeat every 15 s
CHUNK = 1 << 20


class PlatformError(RuntimeError):
    """The platform refused a call: `status` (HTTP, 0 when unreachable), `code` its error code."""

    def __init__(self, message: str, status: int = 0, code: str = "", retry_after: float = 0):
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


@dataclass
class ExecOutcome:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


def _detail(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """(message, code) from an error answer: {"detail", "code"} or {"<field>": [...]}."""
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return exc.reason or f"HTTP {exc.code}", ""
    if not isinstance(body, dict):
        return str(body), ""
    if "detail" in body:
        return str(body["detail"]), str(body.get("code") or "")
    parts = [f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in body.items()]
    field = next(iter(body), "")
    return "; ".join(parts) or f"HTTP {exc.code}", field


def tar_directory(path: Path, out, *, gzip: bool) -> None:
    """The directory's content (not the directory itself) as a tar into file object `out`."""
    with tarfile.open(fileobj=out, mode="w:gz" if gzip else "w") as tar:
        for child in sorted(Path(path).iterdir()):
            tar.add(child, arcname=child.name)


class TaskSandboxes:
    """The task-sandbox endpoints at `base_url` with bearer `api_key`."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None):
        base = (base_url or os.environ.get("BELVEDIR_BASE_URL") or "").rstrip("/")
        key = api_key if api_key is not None else os.environ.get("BELVEDIR_API_KEY", "")
        if not base:
            raise PlatformError("BELVEDIR_BASE_URL is not set: no platform to run task sandboxes.")
        if not key:
            raise PlatformError("BELVEDIR_API_KEY is not set: the run's key is needed.")
        self.api = base + "/api/v1"
        self.key = key

    # --- HTTP -------------------------------------------------------------------------------

    def _open(
        self, method: str, path: str, body=None, headers=None, timeout=READ_TIMEOUT, sent=None
    ):
        """The answer to the request; `sent()` is called once the request is written."""
        request = urllib.request.Request(
            self.api + path,
            data=body,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", **(headers or {})},
        )
        try:
            if sent is None:
                return urllib.request.urlopen(request, timeout=timeout)
            return _announcing_opener(sent).open(request, timeout=timeout)
        except urllib.error.HTTPError as exc:
            message, code = _detail(exc)
            retry = exc.headers.get("Retry-After") if exc.headers else None
            try:
                retry_after = float(retry) if retry else 0.0
            except ValueError:
                retry_after = 0.0
            if exc.code == 401:
                message = f"the run's key was refused ({message}); has the run ended?"
            raise PlatformError(
                f"{method} {path}: HTTP {exc.code}: {message}", exc.code, code, retry_after
            ) from None
        except urllib.error.URLError as exc:
            raise PlatformError(
                f"{method} {path}: the platform is unreachable: {exc.reason}"
            ) from None

    @staticmethod
    def _files_path(sandbox_id: str, path: str) -> str:
        if not PurePosixPath(path).is_absolute():
            raise PlatformError(f"task-sandbox paths must be absolute, not {path!r}")
        query = urllib.parse.urlencode({"path": path})
        return f"/task-sandboxes/{urllib.parse.quote(sandbox_id)}/files?{query}"

    # --- the endpoints ----------------------------------------------------------------------

    def create(
        self,
        name: str,
        context_dir: Path,
        *,
        force_build: bool = False,
        wait: Callable[[float], None] = time.sleep,
    ) -> dict:
        """Build the image of `context_dir` (a Dockerfile at its top; `force_build`: again,
        without the cache) and start a task sandbox.

        Waits and retries while the run is at its concurrency (429) or the engine is away
        (503, a few times); every other refusal raises PlatformError.
        """
        boundary = uuid.uuid4().hex
        with tempfile.TemporaryFile() as body:
            if force_build:
                body.write(
                    f'--{boundary}\r\nContent-Disposition: form-data; name="force_build"'
                    "\r\n\r\ntrue\r\n".encode()
                )
            body.write(
                f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'
                f"{name[:200]}\r\n--{boundary}\r\nContent-Disposition: form-data; "
                f'name="context"; filename="context.tar.gz"\r\n'
                "Content-Type: application/gzip\r\n\r\n".encode()
            )
            tar_directory(context_dir, body, gzip=True)
            body.write(f"\r\n--{boundary}--\r\n".encode())
            size = body.tell()
            headers = {
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(size),
            }
            unavailable = 0
            while True:
                body.seek(0)
                try:
                    with self._open(
                        "POST", "/task-sandboxes", body, headers, CREATE_TIMEOUT
                    ) as answer:
                        return json.load(answer)
                except PlatformError as exc:
                    if exc.status == 429:
                        wait(max(exc.retry_after, 1.0))
                        continue
                    if exc.status == 503 and unavailable < 5:
                        unavailable += 1
                        wait(max(exc.retry_after, 2.0 * unavailable))
                        continue
                    raise

    def exec(
        self,
        sandbox_id: str,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | None = None,
        on_output: Callable[[str, str], None] | None = None,
    ) -> ExecOutcome:
        """Run `command` (bash -c; as `user`, a name or uid, None: the image's user) and read
        the streamed answer; `on_output(data, stream)` is called for each chunk as it
        arrives."""
        request: dict = {"command": command, "env": {k: str(v) for k, v in (env or {}).items()}}
        if cwd:
            request["cwd"] = cwd
        if timeout_sec:
            request["timeout_sec"] = max(1, int(timeout_sec))
        if user:
            request["user"] = user
        out: list[str] = []
        err: list[str] = []
        path = f"/task-sandboxes/{urllib.parse.quote(sandbox_id)}/exec"
        headers = {"Content-Type": "application/json"}
        with self._open("POST", path, json.dumps(request).encode(), headers) as answer:
            for line in answer:
                if not line.strip():
                    continue
                event = json.loads(line)
                if "stream" in event:
                    data = str(event.get("data") or "")
                    (out if event["stream"] == "stdout" else err).append(data)
                    if on_output is not None:
                        on_output(data, "stderr" if event["stream"] == "stderr" else "stdout")
                elif "exit_code" in event:
                    return ExecOutcome(
                        int(event["exit_code"]),
                        "".join(out),
                        "".join(err),
                        bool(event.get("timed_out")),
                    )
                elif "error" in event:
                    raise PlatformError(f"exec in task sandbox {sandbox_id}: {event['error']}")
        raise PlatformError(f"exec in task sandbox {sandbox_id}: the stream ended without an exit")

    def put_archive(self, sandbox_id: str, directory: str, archive) -> None:
        """Extract the tar in file object `archive` (seekable) into `directory`."""
        archive.seek(0, io.SEEK_END)
        size = archive.tell()
        archive.seek(0)
        headers = {"Content-Type": "application/x-tar", "Content-Length": str(size)}
        path = self._files_path(sandbox_id, directory)
        self._open("PUT", path, archive, headers, CREATE_TIMEOUT).close()

    def upload_file(self, sandbox_id: str, source: Path, target: str) -> None:
        target_path = PurePosixPath(target)
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w") as tar:
                tar.add(source, arcname=target_path.name, recursive=False)
            self.put_archive(sandbox_id, str(target_path.parent), archive)

    def upload_dir(self, sandbox_id: str, source: Path, target: str) -> None:
        with tempfile.TemporaryFile() as archive:
            tar_directory(source, archive, gzip=False)
            self.put_archive(sandbox_id, target, archive)

    def download(self, sandbox_id: str, source: str, target: Path, *, as_dir: bool) -> None:
        """`source` from the sandbox to `target`: a file's bytes, or a directory's content
        (overwriting what is there). The answer's tar holds `source` under its base name."""
        with self._open("GET", self._files_path(sandbox_id, source)) as answer:
            with tarfile.open(fileobj=answer, mode="r|*") as tar:
                if not as_dir:
                    for member in tar:
                        if member.isfile():
                            target.parent.mkdir(parents=True, exist_ok=True)
                            with tar.extractfile(member) as data, open(target, "wb") as out:
                                shutil.copyfileobj(data, out, CHUNK)
                            return
                    raise PlatformError(f"{source} in task sandbox {sandbox_id} is not a file")
                target.mkdir(parents=True, exist_ok=True)
                for member in tar:
                    parts = PurePosixPath(member.name).parts[1:]
                    if not parts or member.isdev():
                        continue
                    member.name = str(PurePosixPath(*parts))
                    tar.extract(member, target, filter="data")

    def stop(self, sandbox_id: str, sent: Callable[[], None] | None = None) -> dict:
        """Kill and remove it; `sent()` once the request is on its way (belvedir_harbor/stops)."""
        path = f"/task-sandboxes/{urllib.parse.quote(sandbox_id)}"
        with self._open("DELETE", path, sent=sent) as answer:
            return json.load(answer)


def _announcing_opener(sent: Callable[[], None]) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment included) whose connections call
    `sent()` once the request is written, before the answer is read."""

    def announcing(base):
        class Connection(base):
            def getresponse(self, *args, **kwargs):
                sent()
                return super().getresponse(*args, **kwargs)

        return Connection

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(announcing(http.client.HTTPConnection), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            tls = {"context": self._context}
            if hasattr(self, "_check_hostname"):  # Python 3.11; 3.12 keeps it in the context
                tls["check_hostname"] = self._check_hostname
            return self.do_open(announcing(http.client.HTTPSConnection), req, **tls)

    return urllib.request.build_opener(HTTP, HTTPS)
