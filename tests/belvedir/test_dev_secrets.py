"""In development an unset SECRET_KEY is made once, kept in a file of mode 0600 and read again
by every later start, so `make up` restarts keep sessions and signed URLs valid."""

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT_DIGEST = (
    "import hashlib; from django.conf import settings; import django; django.setup(); "
    "print(hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest())"
)


def _start(key_file: Path | None, program: str = PRINT_DIGEST, **extra: str):
    """A development start printing `program`'s output; BELVEDIR_SECRET_KEY_FILE is `key_file`
    (None: unset, with every other BELVEDIR_ variable of the session)."""
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    if key_file is None:
        env = {k: v for k, v in env.items() if not k.startswith("BELVEDIR_")}
    env |= {"BELVEDIR_DEV": "1", "DJANGO_SETTINGS_MODULE": "belvedir.settings", **extra}
    if key_file is not None:
        env["BELVEDIR_SECRET_KEY_FILE"] = str(key_file)
    return subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_development_start_makes_its_secret_key_once_in_a_0600_file_and_never_prints_it(
    tmp_path,
):
    key_file = tmp_path / "var" / "secret_key"
    first = _start(key_file)
    assert first.returncode == 0, first.stderr
    secret = key_file.read_text().strip()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(secret) >= 50 and not secret.startswith("dev-insecure")
    assert first.stdout.strip() == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in first.stdout + first.stderr
    again = _start(key_file)  # the next `make up`
    assert again.stdout == first.stdout and key_file.read_text().strip() == secret
    assert list(key_file.parent.iterdir()) == [key_file]  # no temporary file left


def test_a_secret_key_that_is_set_is_used_and_no_file_is_made(tmp_path):
    key_file = tmp_path / "secret_key"
    done = _start(key_file, SECRET_KEY="given-" + "k" * 40)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == hashlib.sha256(("given-" + "k" * 40).encode()).hexdigest()
    assert not key_file.exists()


def test_a_secret_key_file_that_cannot_be_made_stops_the_start_naming_it(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    done = _start(blocker / "secret_key")
    assert done.returncode != 0
    assert f"SECRET_KEY is unset and {blocker / 'secret_key'} cannot be read or made" in done.stderr


def test_the_var_directory_moves_the_secret_key_and_the_uploads_with_it(tmp_path):
    """A second instance on one checkout (BELVEDIR_VAR_DIR, as the end-to-end test of `make up`
    starts one) keeps its secret key and uploads apart from the checkout's var/."""
    program = PRINT_DIGEST.replace("print(", "print(settings.MEDIA_ROOT, ")
    done = _start(None, program, BELVEDIR_VAR_DIR=str(tmp_path / "instance"))
    assert done.returncode == 0, done.stderr
    key_file = tmp_path / "instance" / "secret_key"
    digest = hashlib.sha256(key_file.read_text().strip().encode()).hexdigest()
    assert done.stdout.split() == [str(tmp_path / "instance" / "media"), digest]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
