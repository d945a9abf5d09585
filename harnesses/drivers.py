"""The drivers that ship with the platform (drivers/<name>/ in this repository), served as
read-only git repositories over HTTP with git's dumb protocol at
`{BELVEDIR_BASE_URL}/git/<name>.git`.

Each is built on demand into a bare repository under `BELVEDIR_CACHE_DIR/git/`: one commit of
the directory's files with a fixed author and date, so the same files give the same commit on
every host (the web server and every worker build their own), then `git update-server-info`.
The worker clones a served driver from its own bare copy (`clone_source`), so a run never
depends on the platform reaching itself over the network, and the repo-host policy does not
apply to the platform's own drivers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings

DRIVERS_DIR = Path(__file__).resolve().parent.parent / "drivers"
DRIVERS = ("belvedir-runner", "harness-harbor")
# Files a driver's repository carries from another driver's directory, so one definition
# serves both: the Harbor driver folds its trials with the Runner's grading.
SHARED = {
    "harness-harbor": (
        ("belvedir-runner", "belvedir_runner/__init__.py"),
        ("belvedir-runner", "belvedir_runner/grading.py"),
    ),
}
_SKIP_DIRS = {
    *("__pycache__", ".git", ".venv", ".pytest_cache", ".ruff_cache"),
    *("harbor-jobs", "harbor-dataset", ".harbor-home"),  # what a local run of the driver leaves
}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "Belvedir",
    "GIT_AUTHOR_EMAIL": "drivers@belvedir.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "Belvedir",
    "GIT_COMMITTER_EMAIL": "drivers@belvedir.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}


class DriverError(Exception):
    """A driver's repository could not be built."""


def served_url(name: str) -> str:
    """Where the platform serves driver `name` (what the catalog cards prefill)."""
    return f"{settings.BELVEDIR_BASE_URL.rstrip('/')}/git/{name}.git"


def served_name(url: str) -> str | None:
    """The driver a repo URL names when it is one of the platform's served drivers, else None."""
    url = (url or "").strip().rstrip("/")
    for name in DRIVERS:
        if url in (served_url(name), served_url(name).removesuffix(".git")):
            return name
    return None


def _files(name: str) -> list[tuple[str, Path]]:
    """Driver `name`'s files: (path in its repository, the file here), its own directory's and
    then the files it shares with another driver (SHARED)."""
    root = DRIVERS_DIR / name
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for file in sorted(files):
            if not file.endswith(_SKIP_SUFFIXES):
                path = Path(folder, file)
                found.append((path.relative_to(root).as_posix(), path))
    for owner, relative in SHARED.get(name, ()):
        found.append((relative, DRIVERS_DIR / owner / relative))
    return found


def _digest(name: str) -> str:
    digest = hashlib.sha256()
    for relative, path in _files(name):
        digest.update(f"{relative}\0{os.access(path, os.X_OK)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def bare_repo(name: str) -> Path:
    """The bare repository of driver `name` for its current files, built when missing."""
    if name not in DRIVERS or not (DRIVERS_DIR / name).is_dir():
        raise DriverError(f"there is no driver {name!r}")
    parent = Path(settings.BELVEDIR_CACHE_DIR) / "git" / name
    target = parent / f"{_digest(name)}.git"
    if (target / "info" / "refs").exists():
        return target
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
    try:
        _build(name, staging)
        try:
            staging.rename(target)  # atomic: a concurrent build either wins or finds it built
        except OSError:
            if not (target / "info" / "refs").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _build(name: str, bare: Path) -> None:
    index = bare / "build-index"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(bare),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        **_COMMIT_ENV,
    }

    def git(*args: str, stdin: str | None = None, **extra: str) -> str:
        done = subprocess.run(
            ["git", f"--git-dir={bare}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, **extra},
        )
        if done.returncode != 0:
            raise DriverError(f"git {args[0]} failed for {name}: {done.stderr.strip()[:300]}")
        return done.stdout.strip()

    git("init", "-q", "--bare", "--initial-branch=main", str(bare))
    indexed = {"GIT_INDEX_FILE": str(index)}
    entries = []
    for relative, path in _files(name):
        blob = git("hash-object", "-w", "--", str(path))
        mode = "100755" if os.access(path, os.X_OK) else "100644"
        entries.append(f"{mode} {blob}\t{relative}\n")
    git("update-index", "--index-info", stdin="".join(entries), **indexed)
    tree = git("write-tree", **indexed)
    commit = git("commit-tree", tree, stdin=f"The {name} driver, as shipped with Belvedir\n")
    git("update-ref", "refs/heads/main", commit)
    git("repack", "-a", "-d", "-q")
    git("update-server-info")
    index.unlink(missing_ok=True)


def clone_source(url: str) -> str:
    """What the worker clones for a repo URL: the local bare copy (a file:// URL) for a served
    driver, else the URL itself."""
    name = served_name(url)
    return bare_repo(name).as_uri() if name else url


def served_file(name: str, path: str) -> Path | None:
    """The file of driver `name`'s bare repository that `path` names, or None (unknown driver,
    a path leaving the repository, a directory, a symlink)."""
    if name not in DRIVERS:
        return None
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        return None
    root = bare_repo(name)
    candidate = root.joinpath(*parts)
    if candidate.is_symlink() or not candidate.is_file():
        return None
    if os.path.commonpath([root.resolve(), candidate.resolve()]) != str(root.resolve()):
        return None
    return candidate
