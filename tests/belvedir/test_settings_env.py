"""Settings fail loudly on bad values instead of guessing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envbool, envfloat, envint, envlist, envmicros, envstr

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("off", False),
        ("", False),
    ],
)
def test_envbool_reads_the_plain_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("BV_TEST_FLAG", raw)
    assert envbool("BV_TEST_FLAG", not expected) is expected


@pytest.mark.parametrize("raw", ["yes", "no", "y", "enabled", "2"])
def test_envbool_refuses_yes_ish_strings_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("BV_TEST_FLAG", raw)
    with pytest.raises(ImproperlyConfigured, match="BV_TEST_FLAG"):
        envbool("BV_TEST_FLAG", False)


def test_envbool_uses_the_default_when_unset(monkeypatch):
    monkeypatch.delenv("BV_TEST_FLAG", raising=False)
    assert envbool("BV_TEST_FLAG", True) is True


def test_envint_refuses_a_non_number_naming_the_variable(monkeypatch):
    monkeypatch.setenv("BV_TEST_INT", "abc")
    with pytest.raises(ImproperlyConfigured, match="BV_TEST_INT.*'abc'"):
        envint("BV_TEST_INT", 4)


def test_envint_refuses_a_value_below_its_minimum(monkeypatch):
    monkeypatch.setenv("BV_TEST_INT", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        envint("BV_TEST_INT", 4, minimum=1)


def test_envint_reads_a_number_and_defaults_when_blank(monkeypatch):
    monkeypatch.setenv("BV_TEST_INT", " 12 ")
    assert envint("BV_TEST_INT", 4) == 12
    monkeypatch.setenv("BV_TEST_INT", "")
    assert envint("BV_TEST_INT", 4) == 4


def test_envfloat_refuses_a_non_number(monkeypatch):
    monkeypatch.setenv("BV_TEST_FLOAT", "two")
    with pytest.raises(ImproperlyConfigured, match="BV_TEST_FLOAT"):
        envfloat("BV_TEST_FLOAT", 2.0)


def test_envlist_splits_on_commas_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("BV_TEST_LIST", "a.example, b.example,,")
    assert envlist("BV_TEST_LIST", []) == ["a.example", "b.example"]
    monkeypatch.delenv("BV_TEST_LIST")
    assert envstr("BV_TEST_LIST", "x") == "x"


def _load_settings(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "belvedir.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "env,named",
    [
        ({"DEBUG": "yes"}, "DEBUG"),
        ({"Q_WORKERS": "abc"}, "Q_WORKERS"),
        ({"Q_TIMEOUT": "5000", "Q_RETRY": "4000"}, "Q_TIMEOUT"),
        ({"DATABASE_URL": "nonsense://"}, "DATABASE_URL"),
        ({"BELVEDIR_DEV": "0", "SECRET_KEY": ""}, "SECRET_KEY"),
        ({"BELVEDIR_SANDBOX_BACKEND": "kubernetes"}, "BELVEDIR_SANDBOX_BACKEND"),
        ({"BELVEDIR_SANDBOX_BACKEND": "my_backend.Backend"}, "BELVEDIR_SANDBOX_BACKEND"),
        ({"BELVEDIR_EXPORT_BASE_AGENTS": "claude-code,my agent"}, "BELVEDIR_EXPORT_BASE_AGENTS"),
    ],
)
def test_the_settings_module_refuses_to_start_with_a_bad_value(env, named):
    result = _load_settings(**env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and named in result.stderr


def test_the_sandbox_backend_is_read_from_the_environment():
    show = "from belvedir.sandbox_config import sandbox_config; print(sandbox_config().backend)"
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {show}"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "belvedir.settings",
            "BELVEDIR_SANDBOX_BACKEND": "tests.helpers.fake_backend:FakeBackend",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tests.helpers.fake_backend:FakeBackend"


def _settings_with(env: dict) -> subprocess.CompletedProcess:
    """Import the settings module in a fresh interpreter with this environment."""
    return subprocess.run(
        [sys.executable, "-c", "import belvedir.settings"],
        env={"PATH": os.environ["PATH"], **env},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
    )


def test_production_mode_refuses_to_start_without_its_secrets():
    done = _settings_with({"BELVEDIR_DEV": "0"})
    assert done.returncode != 0 and "SECRET_KEY must be set" in done.stderr
    done = _settings_with({"BELVEDIR_DEV": "0", "SECRET_KEY": "s" * 40})
    assert done.returncode != 0 and "API_KEY_HASH_SECRET must be set" in done.stderr


def test_production_mode_starts_with_three_distinct_long_secrets():
    secrets = {
        "SECRET_KEY": "a" * 40,
        "API_KEY_HASH_SECRET": "b" * 40,
        "FIELD_ENCRYPTION_KEY": "c" * 40,
    }
    assert _settings_with({"BELVEDIR_DEV": "0", **secrets}).returncode == 0
    same = {**secrets, "FIELD_ENCRYPTION_KEY": "a" * 40}
    assert "must differ" in _settings_with({"BELVEDIR_DEV": "0", **same}).stderr
    short = {**secrets, "SECRET_KEY": "short"}
    assert "at least 32 characters" in _settings_with({"BELVEDIR_DEV": "0", **short}).stderr


@pytest.mark.parametrize(
    "raw, micros",
    [("2.00", 2_000_000), ("0.5", 500_000), ("$3", 3_000_000), ("0.000001", 1), ("", 2_000_000)],
)
def test_envmicros_reads_dollars_as_integer_micro_dollars(monkeypatch, raw, micros):
    monkeypatch.setenv("BV_TEST_USD", raw)
    assert envmicros("BV_TEST_USD", "2.00") == micros


@pytest.mark.parametrize("raw", ["-1", "two", "1.0000001", "1,5"])
def test_envmicros_refuses_what_is_not_an_amount_of_dollars(monkeypatch, raw):
    monkeypatch.setenv("BV_TEST_USD", raw)
    with pytest.raises(ImproperlyConfigured, match="BV_TEST_USD"):
        envmicros("BV_TEST_USD", "2.00")
