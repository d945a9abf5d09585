"""The drivers ship with the platform: served as read-only git repositories over HTTP (dumb
protocol) at {BELVEDIR_BASE_URL}/git/<name>.git, prefilled by the catalog cards, and cloned by
the worker from its own bare copy even where internal repo hosts are refused."""

import shutil
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from harnesses import drivers, policy
from harnesses.catalog import preset_get
from runs import launch_checks
from runs.executor import clone_repo

SERVED_CARDS = ["runner", "harbor-runner", "swe-bench-verified", "gaia", "openclaw", "pi"]


@pytest.fixture
def served(settings, tmp_path):
    settings.BELVEDIR_CACHE_DIR = str(tmp_path / "cache")
    settings.BELVEDIR_BASE_URL = "https://bench.example.org"
    return settings


def _driver_files(name: str) -> set[str]:
    root = drivers.DRIVERS_DIR / name
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
    } | {relative for _, relative in drivers.SHARED.get(name, ())}


@pytest.mark.usefixtures("owner_pays_as_you_go")
@pytest.mark.parametrize("slug", SERVED_CARDS)
def test_catalog_cards_prefill_the_platforms_served_driver(owner, served, slug):
    body = owner.api.post("/api/v1/harnesses", {"preset": slug}, format="json").json()
    name = "belvedir-runner" if slug == "runner" else "harness-harbor"
    assert body["repo_url"] == f"https://bench.example.org/git/{name}.git"
    catalog = owner.api.get("/api/v1/catalog").json()
    urls = {p["slug"]: p["repo_url"] for g in catalog["groups"] for p in g["presets"]}
    assert urls[slug] == body["repo_url"]


def test_the_runner_card_runs_the_runner_with_nothing_to_install(served):
    preset = preset_get("runner")
    assert preset.install_command == "python3 -m belvedir_runner --check"
    assert preset.run_command == "python3 -m belvedir_runner"
    assert '"verifier": {"kind": "rubric"' in preset.tasks


@pytest.mark.parametrize("name", drivers.DRIVERS)
def test_git_clones_a_served_driver_over_http(live_server, settings, tmp_path, name):
    settings.BELVEDIR_CACHE_DIR = str(tmp_path / "cache")
    dest = tmp_path / "clone"
    done = subprocess.run(
        ["git", "clone", "-q", f"{live_server.url}/git/{name}.git", str(dest)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_TERMINAL_PROMPT": "0"},
    )
    assert done.returncode == 0, done.stderr
    cloned = {str(p.relative_to(dest)) for p in dest.rglob("*") if ".git" not in p.parts}
    assert {c for c in cloned if (dest / c).is_file()} == _driver_files(name)
    source = drivers.DRIVERS_DIR / name / "README.md"
    assert (dest / "README.md").read_text() == source.read_text()


def test_the_harbor_driver_serves_the_runners_grading_file_verbatim(served, tmp_path):
    """One folding definition for both drivers: the Harbor driver's repository carries the
    Runner's grading module as it is."""
    dest = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", drivers.bare_repo("harness-harbor").as_uri(), str(dest)],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    grading = "belvedir_runner/grading.py"
    runner_file = drivers.DRIVERS_DIR / "belvedir-runner" / grading
    assert (dest / grading).read_bytes() == runner_file.read_bytes()
    assert not (drivers.DRIVERS_DIR / "harness-harbor" / "belvedir_runner").exists()
    # The served driver imports it from its own clone (no Runner installed).
    done = subprocess.run(
        ["python3", "-c", "from belvedir_harbor import run; print(run.grading.__file__)"],
        cwd=dest,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(dest / grading)


def test_the_same_files_give_the_same_commit_on_every_host(settings, tmp_path):
    commits = []
    for host in ("web", "worker"):
        settings.BELVEDIR_CACHE_DIR = str(tmp_path / host)
        bare = drivers.bare_repo("belvedir-runner")
        commits.append((bare / "info" / "refs").read_text().split()[0])
    assert commits[0] == commits[1] and len(commits[0]) == 40


def test_a_change_under_drivers_is_served_as_a_new_commit(served, tmp_path, monkeypatch):
    copy = tmp_path / "drivers"
    shutil.copytree(drivers.DRIVERS_DIR / "belvedir-runner", copy / "belvedir-runner")
    monkeypatch.setattr(drivers, "DRIVERS_DIR", copy)
    client = Client()
    before = client.get("/git/belvedir-runner.git/info/refs")
    assert before["Cache-Control"] == "no-cache"
    (copy / "belvedir-runner" / "README.md").write_text("changed\n")
    after = client.get("/git/belvedir-runner.git/info/refs")
    assert before.content.split()[0] != after.content.split()[0]
    assert after.content.split()[1] == b"refs/heads/main"


@pytest.mark.parametrize(
    "path",
    [
        "/git/belvedir-runner.git/../../belvedir/settings/__init__.py",
        "/git/belvedir-runner.git/%2e%2e/%2e%2e/belvedir/settings/__init__.py",
        "/git/belvedir-runner.git/objects",
        "/git/belvedir-runner.git/objects//info/packs",
        "/git/nope.git/HEAD",
        "/git/contract-harness.git/HEAD",
    ],
)
def test_nothing_outside_a_drivers_repository_is_served(served, path):
    assert Client().get(path).status_code == 404


def test_served_repositories_are_read_only(served):
    client = Client()
    assert client.get("/git/belvedir-runner.git/HEAD").content == b"ref: refs/heads/main\n"
    assert client.post("/git/belvedir-runner.git/info/refs").status_code == 405
    assert client.put("/git/belvedir-runner.git/HEAD").status_code == 405


@pytest.fixture
def hosted(served):
    served.BELVEDIR_DEV = False
    served.BELVEDIR_REPO_HOST_ALLOWLIST = []
    served.BELVEDIR_BASE_URL = "http://127.0.0.1:8000"  # an internal host, plain http
    return served


def test_a_production_install_admits_its_own_drivers_on_an_internal_host(owner, hosted):
    url = "http://127.0.0.1:8000/git/belvedir-runner.git"
    assert policy.validate_repo_url(url) == url
    response = owner.api.post("/api/v1/harnesses", {"preset": "runner"}, format="json")
    assert response.status_code == 201 and response.json()["repo_url"] == url
    # Any other repo on that host stays refused.
    with pytest.raises(Exception, match="loopback address"):
        policy.validate_repo_url("https://127.0.0.1:8000/git/other.git")


def test_the_worker_clones_a_served_driver_from_its_own_bare_copy(hosted, tmp_path):
    url = drivers.served_url("belvedir-runner")
    assert drivers.clone_source(url).startswith("file://" + hosted.BELVEDIR_CACHE_DIR)
    launch_checks.repo_check(repo_url=url)  # git ls-remote, no server listening on :8000
    clone_repo(url, "", tmp_path / "repo")
    assert (tmp_path / "repo" / "belvedir_runner" / "runner.py").is_file()
    assert not (tmp_path / "repo" / ".git").exists()


def test_a_fork_of_a_driver_is_an_ordinary_repo_url(hosted):
    assert drivers.clone_source("https://github.com/me/belvedir-runner") == (
        "https://github.com/me/belvedir-runner"
    )
    assert drivers.served_name("https://github.com/me/belvedir-runner.git") is None


def test_a_missing_driver_directory_is_a_clear_error(served, monkeypatch, tmp_path):
    monkeypatch.setattr(drivers, "DRIVERS_DIR", Path(tmp_path / "none"))
    with pytest.raises(drivers.DriverError, match="no driver 'belvedir-runner'"):
        drivers.bare_repo("belvedir-runner")
