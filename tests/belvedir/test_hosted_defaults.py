"""Hosted defaults: check --deploy clean in production mode, database connection settings."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _production_env(**extra: str) -> dict:
    return {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "belvedir.settings",
        "BELVEDIR_DEV": "0",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(60),
        "API_KEY_HASH_SECRET": secrets.token_urlsafe(40),
        "FIELD_ENCRYPTION_KEY": secrets.token_urlsafe(40),
        "ALLOWED_HOSTS": "bench.example.com",
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/unused"),
        **extra,
    }


def test_check_deploy_is_clean_in_production_mode():
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_production_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout, done.stdout


def _database_settings(env: dict, argv: list[str]) -> str:
    code = (
        f"import sys; sys.argv = {argv!r}; import django; django.setup(); "
        "from django.conf import settings; d = settings.DATABASES['default']; "
        "print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_connections_persist_conn_max_age_with_health_checks_and_none_under_runserver():
    env = _production_env(CONN_MAX_AGE="30")
    assert _database_settings(env, ["gunicorn"]) == "30 True"
    assert _database_settings(env, ["manage.py", "runserver"]) == "0 True"
    assert _database_settings(_production_env(), ["manage.py", "qcluster"]) == "60 True"


def test_a_bad_rate_setting_stops_the_start_up_naming_it():
    done = subprocess.run(
        [sys.executable, "-c", "import belvedir.settings"],
        cwd=ROOT,
        env=_production_env(BELVEDIR_API_RATE="lots"),
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "BELVEDIR_API_RATE" in done.stderr
