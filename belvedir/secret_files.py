"""Development secrets kept in files of mode 0600 (under var/), so `make up` restarts keep them.

Written whole to a temporary file in the same folder first, so no reader ever sees half a
secret; never printed or logged."""

import os
import secrets
import tempfile
from pathlib import Path


def _temporary(path: Path, value: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return Path(name)


def secret_file_read(path: Path) -> str:
    """The secret in `path`, or "" when there is none."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def secret_file_write(path: Path, value: str) -> None:
    """Replace `path` with `value` (mode 0600)."""
    os.replace(_temporary(path, value), path)


def secret_file_once(path: Path, *, nbytes: int = 50) -> str:
    """The secret in `path`, made (random, mode 0600) when there is none; two processes
    starting at once agree on one (the file is linked into place only if still absent)."""
    value = secret_file_read(path)
    if value:
        return value
    tmp = _temporary(path, secrets.token_urlsafe(nbytes))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return secret_file_read(path)
