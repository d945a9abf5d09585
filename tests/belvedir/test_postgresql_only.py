"""PostgreSQL is the only database: the settings refuse any other engine, and no module keeps a
branch or a fallback for one (what no test runs breaks where users run it: issue 22)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.databases import DEFAULT_URL, database_exists, unmade_database_url

ROOT = Path(__file__).resolve().parents[2]


def _tracked_python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    here = Path(__file__).resolve()
    return [ROOT / name for name in filter(None, listed.split("\0")) if ROOT / name != here]


def _database_branches(path: Path) -> list[str]:
    """`<connection>.vendor` reads, and any mention of SQLite in code or strings."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "vendor":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .vendor")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "sqlite" in node.value.lower():
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
        elif isinstance(node, ast.alias) and "sqlite" in node.name.lower():
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: import {node.name}")
    return found


def test_no_module_branches_on_the_database_vendor_or_mentions_sqlite():
    files = _tracked_python_files()
    assert any(f.parts[-2:] == ("services", "ingest.py") for f in files)  # the scan sees the apps
    found = [hit for path in files for hit in _database_branches(path)]
    assert found == []


def _settings_with(database_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-c", "import belvedir.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "database_url", ["sqlite:///db.sqlite3", "sqlite://:memory:", "mysql://root@127.0.0.1/b"]
)
def test_the_settings_refuse_any_database_but_postgresql_with_one_clear_message(database_url):
    done = _settings_with(database_url)
    assert done.returncode != 0
    assert "ImproperlyConfigured: DATABASE_URL must be a PostgreSQL URL" in done.stderr
    assert "Belvedir runs on PostgreSQL only" in done.stderr


def test_the_default_database_is_postgresql_on_this_machine():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from belvedir import settings; d = settings.DATABASES['default']; "
            "print(d['ENGINE'], d['HOST'], d['PORT'], d['NAME'], d['USER'])",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "django.db.backends.postgresql",
        "127.0.0.1",
        "5432",
        "belvedir",
        "postgres",
    ]


def _manage(*args: str, database_url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url, "BELVEDIR_DEV": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.docker
def test_make_up_creates_its_database_when_the_server_has_none_and_keeps_one_that_exists():
    with unmade_database_url("belvedir_made") as url:
        assert not database_exists(url)
        made = _manage("ensure_database", database_url=url)
        assert made.returncode == 0 and "created database belvedir_made_" in made.stderr
        assert database_exists(url)
        again = _manage("ensure_database", database_url=url)
        assert again.returncode == 0 and again.stderr == "", again.stderr


def test_a_server_that_does_not_answer_is_named_when_make_up_needs_its_database():
    done = _manage("ensure_database", database_url="postgres://postgres@127.0.0.1:1/nothing")
    assert done.returncode != 0
    assert "PostgreSQL at 127.0.0.1:1" in done.stderr and "make machine" in done.stderr


def test_make_machine_uses_a_postgresql_server_that_already_answers_as_it_is():
    url = os.environ.get("DATABASE_URL", DEFAULT_URL)
    done = subprocess.run(
        ["bash", "scripts/ensure-postgres.sh"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    assert done.stdout == f"ensure-postgres: PostgreSQL answers at {host_port}; used as it is\n"


def test_make_machine_refuses_a_database_url_that_is_not_postgresql():
    done = subprocess.run(
        ["bash", "scripts/ensure-postgres.sh"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": "sqlite:///db.sqlite3"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "DATABASE_URL must be a PostgreSQL URL" in done.stderr
