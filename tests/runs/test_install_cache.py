"""The install cache end to end (harnesses/install_cache.py, sandboxes/installs.py): runs of a
harness in real sandboxes under gVisor, through the executor. A re-run starts from the first
run's snapshot, skips the install and still sees every file it wrote (the repo, the venv, the
home); a changed commit, install command, env value, secret value or image installs again;
another organization never reuses; a failed install (a forged marker too) caches nothing;
BELVEDIR_INSTALL_CACHE=off keeps none; clearing from the harness page and the reaper's sweep
remove the snapshot."""

import io
import uuid

import docker
import pytest

from belvedir.sandbox_config import get_backend
from harnesses.models import InstallSnapshot
from harnesses.services import harness_create, harness_update
from runs import reaper
from runs.executor import execute_run
from runs.models import Run
from runs.services import run_launch
from sandboxes import installcache
from tests.runs.helpers import git

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

INSTALL = (
    "echo INSTALLING; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > built.txt; "
    "cp built.txt /opt/venv/pkg.txt; cp built.txt $HOME/.pkg; echo installed-by-$MODE > mode.txt"
)
RUN = (
    "python3 -c \"import json, os; t = open('built.txt').read().strip(); "
    "v = open('/opt/venv/pkg.txt').read().strip(); h = open(os.path.expanduser('~/.pkg')).read().strip(); "
    "print('TOKEN', t, v == t, h == t); json.dump({'score': 1.0}, open('results.json', 'w'))\""
)


@pytest.fixture
def cache_settings(sandbox_settings, own_data_dir):
    sandbox_settings.BELVEDIR_INSTALL_CACHE_BYTES = 2 * 2**30
    sandbox_settings.BELVEDIR_SANDBOX_RUNTIME = "runsc"
    yield sandbox_settings
    root = installcache.cache_dir(own_data_dir, get_backend().instance)
    for snapshot in installcache.snapshots(root):
        installcache.remove(snapshot)


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "cached-harness"
    path.mkdir()
    (path / "README").write_text("a harness whose install writes files\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "harness")
    return path


def harness_of(owner, repo, **fields):
    data = {
        "name": f"cached {uuid.uuid4().hex[:6]}",
        "repo_url": f"file://{repo}",
        "install_command": INSTALL,
        "run_command": RUN,
        "env": {"MODE": "one"},
        **fields,
    }
    return harness_create(project=owner.project, created_by=owner.user, **data)


def run_of(tenant, harness, capture) -> Run:
    with capture(execute=False):
        run = run_launch(project=tenant.project, harness=harness, created_by=tenant.user)
    execute_run(run.pk)
    return Run.objects.get(pk=run.pk)


def token(run) -> str:
    (line,) = [line for line in run.log_tail.splitlines() if line.startswith("TOKEN ")]
    assert line.endswith("True True"), line  # the venv's and the home's files came along
    value = line.split()[1]
    assert len(value) == 32, line  # 16 random bytes the install wrote
    return value


def installed(run) -> bool:
    return "INSTALLING" in run.log_tail


@pytest.fixture
def launched(owner, repo, cache_settings, django_capture_on_commit_callbacks):
    """A run of the harness, executed to its end, succeeded (`tenant`: another's)."""

    def go(harness, tenant=None, status="succeeded"):
        run = run_of(tenant or owner, harness, django_capture_on_commit_callbacks)
        assert run.status == status, run.log_tail
        return run

    return go


def test_a_rerun_skips_the_install_and_sees_the_files_it_wrote(owner, repo, launched):
    harness = harness_of(owner, repo)
    first = launched(harness)
    assert installed(first)
    (row,) = InstallSnapshot.objects.filter(harness=harness)
    assert row.run_id == first.pk and row.organization_id == owner.project.organization_id

    second = launched(harness)

    assert not installed(second)
    assert token(second) == token(first)
    assert f"belvedir: install reused from {first.pk}, just now" in second.log_tail
    assert any(f"install reused from {first.pk}" in note for note in second.notes)
    page = owner.web.get(f"/runs/{second.pk}/")
    assert f"install reused from {first.pk}" in page.content.decode()
    third = launched(harness)  # from the copy made ahead as the second one ended
    assert not installed(third) and token(third) == token(first)
    row.refresh_from_db()
    assert row.reused == 2


def test_a_changed_commit_install_command_env_or_secret_value_installs_again(owner, repo, launched):
    harness = harness_of(owner, repo, env={"MODE": "one", "API_TOKEN": "secret-1"})
    first = launched(harness)
    assert installed(first) and not installed(launched(harness))

    (repo / "README").write_text("changed\n")
    git(repo, "commit", "-qam", "another commit")
    assert installed(launched(harness))  # the new commit's first run

    values = {
        "name": harness.name,
        "repo_url": harness.repo_url,
        "run_command": RUN,
        "install_command": INSTALL,
        "env": {"MODE": "one", "API_TOKEN": "secret-1"},
    }
    for change in (
        {"install_command": INSTALL + "; true"},
        {"env": {"MODE": "two", "API_TOKEN": "secret-1"}},
        {"env": {"MODE": "two", "API_TOKEN": "secret-2"}},  # only the secret's value
    ):
        values.update(change)
        harness_update(harness=harness, **values)
        harness.refresh_from_db()
        assert installed(launched(harness)), change
    assert "secret-2" not in str(list(InstallSnapshot.objects.values()))


def test_another_image_does_not_reuse(owner, repo, launched, cache_settings):
    harness = harness_of(owner, repo)
    launched(harness)
    client = docker.from_env()
    dockerfile = (
        f"FROM {cache_settings.BELVEDIR_SANDBOX_IMAGE}\nLABEL belvedir.test=install-cache\n"
    )
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), rm=True)
    try:
        cache_settings.BELVEDIR_SANDBOX_IMAGE = image.id
        assert installed(launched(harness))
    finally:
        client.images.remove(image.id, force=True)
        client.close()


def test_another_organization_never_reuses(owner, repo, launched, outsider):
    harness = harness_of(owner, repo)
    first = launched(harness)
    theirs = harness_of(outsider, repo, name=harness.name)

    # The same repo, commit, install command and env in another organization: it installs.
    run = launched(theirs, tenant=outsider)
    assert installed(run) and token(run) != token(first)
    # Even handed the first organization's key, the backend finds nothing under another's.
    root = installcache.cache_dir(get_backend().data_dir, get_backend().instance)
    (snapshot,) = [s for s in installcache.snapshots(root) if s.run_id == first.pk]
    assert installcache.find(root, outsider.project.organization_id, snapshot.key) is None


def test_a_failed_install_caches_nothing_even_with_a_forged_marker(owner, repo, launched):
    forged = "mkdir -p ../.belvedir; echo 'installed 00ff' > ../.belvedir/installed; exit 3"
    harness = harness_of(owner, repo, install_command=f"echo INSTALLING; {forged}")
    launched(harness, status="failed")
    assert not InstallSnapshot.objects.exists()
    root = installcache.cache_dir(get_backend().data_dir, get_backend().instance)
    assert installcache.snapshots(root) == []


def test_the_cache_off_in_the_harness_env_keeps_nothing(owner, repo, launched):
    harness = harness_of(owner, repo, env={"BELVEDIR_INSTALL_CACHE": "off"})
    launched(harness)
    assert installed(launched(harness))
    assert not InstallSnapshot.objects.exists()


def test_clearing_on_the_harness_page_then_the_reapers_sweep_remove_the_snapshot(
    owner, repo, launched
):
    harness = harness_of(owner, repo)
    first = launched(harness)
    root = installcache.cache_dir(get_backend().data_dir, get_backend().instance)
    (snapshot,) = installcache.snapshots(root)
    page = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert first.pk in page and "Clear install cache" in page

    response = owner.web.post(f"/harnesses/{harness.pk}/install-cache/clear/")
    assert response.status_code == 303
    assert not InstallSnapshot.objects.exists()
    assert installed(launched(harness))  # its row gone: not reused, even before the sweep
    InstallSnapshot.objects.all().delete()  # the second run's too
    reaper.reap()
    assert installcache.snapshots(root) == [] and not snapshot.image.exists()
