"""The worker's git reaches only public repo hosts and uses none of the worker's credentials.

No traffic is sent: hosts are literal addresses or `localhost`, resolved on this machine, and
the git commands below read local repos or ask for credentials without a remote.
"""

import os
import subprocess
from pathlib import Path

import pytest

from belvedir import git as runs_git
from harnesses import policy
from tests.runs.helpers import EXAMPLES, git, git_repo_of

INTERNAL_REPO_URLS = [
    "git://127.0.0.1/harness.git",
    "git://127.0.0.1:9418/harness.git",
    "https://10.1.2.3/x.git",
    "https://172.16.0.9/x.git",
    "https://192.168.1.20/x.git",
    "https://100.64.3.4/x.git",
    "https://169.254.169.254/latest/meta-data",
    "https://0.0.0.0/x.git",
    "https://224.0.0.1/x.git",
    "https://[::1]/x.git",
    "https://[fe80::1]/x.git",
    "https://[fd00::5]/x.git",
    "https://[::ffff:127.0.0.1]/x.git",
    "https://127.1/x.git",
    "https://localhost/x.git",
    "ssh://git@192.168.0.7/org/x.git",
    "git@10.0.0.8:org/x.git",
]


@pytest.fixture
def hosted(settings):
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_REPO_HOST_ALLOWLIST = []
    return settings


@pytest.mark.parametrize("url", INTERNAL_REPO_URLS)
def test_repos_on_internal_addresses_are_refused_with_400_on_repo_url(owner, hosted, url):
    response = owner.api.post(
        "/api/v1/harnesses",
        {"name": "x", "repo_url": url, "run_command": "true"},
        format="json",
    )
    assert response.status_code == 400
    message = response.json()["repo_url"][0]
    assert "address; repos must be on the public internet" in message


def test_the_refusal_names_what_kind_of_address_the_host_is(hosted):
    expected = {
        "git://127.0.0.1/x.git": "loopback",
        "https://10.1.2.3/x.git": "private",
        "https://100.64.3.4/x.git": "carrier-grade NAT",
        "https://169.254.169.254/x": "link-local",
        "https://0.0.0.0/x.git": "unspecified",
        "https://224.0.0.1/x.git": "multicast",
        "https://localhost/x.git": "loopback",
    }
    for url, kind in expected.items():
        with pytest.raises(policy.Invalid) as error:
            policy.validate_repo_url(url)
        assert f"is a {kind} address" in error.value.message, url
        assert error.value.field == "repo_url"


def test_public_addresses_are_accepted_without_development_mode(hosted):
    for url in ["https://93.184.216.34/x.git", "https://[2606:4700::1111]/x.git"]:
        assert policy.validate_repo_url(url) == url


def test_the_operator_allow_list_admits_a_named_host_or_a_network(hosted):
    hosted.BELVEDIR_REPO_HOST_ALLOWLIST = ["localhost", "10.0.0.0/8"]
    assert policy.validate_repo_url("https://localhost/x.git")
    assert policy.validate_repo_url("https://10.1.2.3/x.git")
    with pytest.raises(policy.Invalid):
        policy.validate_repo_url("https://192.168.1.20/x.git")


def test_development_mode_allows_local_repo_hosts(settings):
    settings.BELVEDIR_DEV = True
    assert policy.validate_repo_url("git://127.0.0.1:9418/x.git")


@pytest.mark.docker
def test_a_harness_saved_on_a_local_host_is_refused_at_launch_outside_development(owner, settings):
    created = owner.api.post(
        "/api/v1/harnesses",
        {"name": "x", "repo_url": "git://127.0.0.1:1/x.git", "run_command": "true"},
        format="json",
    )
    assert created.status_code == 201
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_REPO_HOST_ALLOWLIST = []
    response = owner.api.post("/api/v1/runs", {"harness": created.json()["id"]}, format="json")
    assert response.status_code == 400
    assert "127.0.0.1 is a loopback address" in response.json()["harness"][0]


def test_the_worker_refuses_to_clone_from_an_internal_host(hosted, tmp_path):
    with pytest.raises(runs_git.GitError, match="loopback address"):
        from runs.executor import clone_repo

        clone_repo("git://127.0.0.1:1/x.git", "", tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


@pytest.fixture
def planted_home(tmp_path, monkeypatch):
    """A worker HOME with a credential helper that leaves a marker and an insteadOf rewrite."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("not a key\n")
    marker = tmp_path / "helper-ran"
    decoy = git_repo_of(EXAMPLES / "contract-harness", tmp_path / "decoy")
    (home / ".gitconfig").write_text(
        f'[credential]\n\thelper = "!touch {marker}; true"\n'
        f'[url "{decoy}"]\n\tinsteadOf = file:///planted/\n'
    )
    (home / ".git-credentials").write_text("https://bob:s3cret@example.com\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'credential.helper'='!touch {marker}; true'")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    return {"home": home, "marker": marker}


def _credential_fill(env: dict[str, str]) -> None:
    subprocess.run(
        ["git", "credential", "fill"],
        input="protocol=https\nhost=example.com\n\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


def test_a_credential_helper_in_the_workers_home_is_never_consulted(planted_home):
    _credential_fill({**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    assert planted_home["marker"].exists()  # the planted helper works with the worker's env
    planted_home["marker"].unlink()
    _credential_fill(runs_git.git_env())
    assert not planted_home["marker"].exists()


def test_the_workers_git_config_does_not_rewrite_repo_urls(planted_home, tmp_path):
    with pytest.raises(runs_git.GitError, match="cannot be read"):
        runs_git.ls_remote("file:///planted/", timeout=30)
    real = git_repo_of(EXAMPLES / "contract-harness", tmp_path / "real")
    head = git(Path(real.removeprefix("file://")), "rev-parse", "HEAD")
    assert head in runs_git.ls_remote(real, timeout=30)


def test_git_runs_with_a_clean_home_no_ssh_identities_and_only_the_machines_proxy_and_ca(
    planted_home, monkeypatch
):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("GIT_SSL_CAINFO", "/etc/ssl/certs/ca-certificates.crt")
    env = runs_git.git_env()
    assert env["HOME"] != str(planted_home["home"])
    assert not any(Path(env["HOME"]).iterdir())
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    ssh = env["GIT_SSH_COMMAND"].split()
    for option in ["IdentitiesOnly=yes", "IdentityFile=none", "BatchMode=yes"]:
        assert option in ssh
    assert ssh[ssh.index("-F") + 1] == "/dev/null"
    assert "SSH_AUTH_SOCK" not in env and "GIT_CONFIG_PARAMETERS" not in env
    assert env["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert env["GIT_SSL_CAINFO"] == "/etc/ssl/certs/ca-certificates.crt"
    assert env["PATH"] == os.environ["PATH"]
