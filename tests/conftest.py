"""Shared fixtures: an owner, a read-only member and an outsider of another organization."""

import os

import pytest
from django.contrib.auth import get_user_model

from belvedir.models import Role
from tests.helpers.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.hypothesis_profiles import load_profile
from tests.helpers.tenants import Tenant, member_of, pay_as_you_go, tenant

# The sandbox fixtures (contract_repo, sandbox_settings, make_harness, cluster, task_images),
# for every app.
pytest_plugins = [
    "tests.helpers.run_fixtures",
    "tests.helpers.engines",
    "tests.helpers.task_sandboxes",
    "tests.helpers.offline_network",
    "tests.helpers.leaks",  # which test left a mount or a container behind
]


# No warm sandboxes (sandboxes/warm.py) unless a test asks for them (tests/runs/test_warm_pool.py):
# tests that count a host's containers and volumes see only their own. Workers started in
# another process inherit it.
os.environ.setdefault("BELVEDIR_SANDBOX_WARM", "0")
# No install cache either (harnesses/install_cache.py) unless a test asks for it
# (tests/runs/test_install_cache.py): a test session's snapshots would outlive its database.
os.environ.setdefault("BELVEDIR_INSTALL_CACHE_BYTES", "0")


# Playwright's sync API (the browser fixture) runs an event loop in this thread; the ORM calls the tests make
# (fixtures, assertions) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_configure(config):
    load_profile()  # few examples locally, the full count in CI (tests/helpers/hypothesis_profiles)
    from django.conf import settings

    settings.BELVEDIR_SANDBOX_WARM = int(os.environ["BELVEDIR_SANDBOX_WARM"])
    settings.BELVEDIR_INSTALL_CACHE_BYTES = int(os.environ["BELVEDIR_INSTALL_CACHE_BYTES"])
    # Every test Client builds the middleware chain anew, and WhiteNoise's would list and stat
    # every static file of every app (~50 ms, most of a plain API request's time) each time;
    # with autorefresh it looks a static file up when one is asked for, as under runserver.
    settings.WHITENOISE_AUTOREFRESH = True


@pytest.fixture
def owner(db, client_factory) -> Tenant:
    return tenant(client_factory, "owner@example.com", "Acme")


@pytest.fixture
def owner_pays_as_you_go(owner) -> Tenant:
    """The owner, its organization with pay as you go on: it may save and launch managed
    Harbor harnesses (the Harbor cards as shipped). Modules that make them use it with
    `pytestmark = pytest.mark.usefixtures("owner_pays_as_you_go")`."""
    pay_as_you_go(owner.org)
    return owner


@pytest.fixture
def outsider(db, client_factory) -> Tenant:
    return tenant(client_factory, "outsider@example.com", "Globex")


@pytest.fixture
def readonly(db, owner, client_factory) -> Tenant:
    """A read-only member of the owner's organization."""
    return member_of(owner, client_factory, "ro@example.com", Role.READONLY)


@pytest.fixture
def client_factory():
    from django.test import Client

    return Client


@pytest.fixture
def member(db, owner, client_factory) -> Tenant:
    """A plain member (can write, cannot manage the organization) of the owner's organization."""
    return member_of(owner, client_factory, "member@example.com", Role.MEMBER)


@pytest.fixture
def superuser(db, client_factory):
    """A Django admin operator, signed in to the browser."""
    User = get_user_model()
    user = User.objects.create_superuser(
        username="operator@example.com", email="operator@example.com", password="correct-horse-9"
    )
    web = client_factory()
    web.force_login(user)
    web.user = user
    return web


@pytest.fixture
def harness(owner):
    """A harness in the owner's project."""
    from harnesses import services as harness_services

    return harness_services.harness_create(
        project=owner.project,
        name="Smoke",
        repo_url="https://github.com/example/harness.git",
        install_command="pip install -r requirements.txt",
        run_command="python run.py",
        env={"MODEL": "openai/gpt-4.1-mini"},
        created_by=owner.user,
    )


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Throttle counters live in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Tests sign users up by the dozen; a slow hasher only slows them down."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def cli(live_server, owner, monkeypatch, capsys):
    """Run `belvedir ARGS...` as the owner's project key; returns (exit code, stdout, stderr)."""
    from belvedir.cli import main

    monkeypatch.setenv("BELVEDIR_API_KEY", owner.key)
    monkeypatch.setenv("BELVEDIR_URL", live_server.url)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def seeded(owner):
    """The owner's project with 30 runs over three harnesses, their sessions, spans and tasks,
    a session of 120 spans, ledger entries and keys (tests/helpers/seed.py)."""
    from tests.helpers.seed import seed

    return seed(owner)


@pytest.fixture(scope="session")
def browser():
    """One Chromium for the whole session (tests/browser and make up's end to end): Playwright's
    sync API keeps its event loop running in this thread while it is open, so a second
    sync_playwright() in the same session is refused."""
    from playwright import sync_api as playwright_api

    if not os.path.exists(CHROMIUM):  # make test installs it: a missing browser is a failure
        pytest.fail(f"no chromium at {CHROMIUM}; run scripts/prepare-machine.sh")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
