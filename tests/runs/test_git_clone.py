"""The worker's shallow checkout: the default branch, a branch, a tag or a commit, without .git,
within the size limit; a ref the repo lacks fails naming git's reason."""

import subprocess

import pytest

from belvedir import git

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.fixture
def repo(tmp_path):
    """A repo whose main has `version` 2; tag v1 and the first commit have 1, branch dev has 3."""
    path = tmp_path / "origin"
    path.mkdir()

    def commit(version: str) -> str:
        (path / "version").write_text(version)
        subprocess.run([*GIT, "add", "-A"], cwd=path, check=True)
        subprocess.run([*GIT, "commit", "-qm", version], cwd=path, check=True)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True)
        return head.stdout.decode().strip()

    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    first = commit("1")
    subprocess.run(["git", "tag", "v1"], cwd=path, check=True)
    subprocess.run(["git", "checkout", "-qb", "dev"], cwd=path, check=True)
    commit("3")
    subprocess.run(["git", "checkout", "-q", "main"], cwd=path, check=True)
    commit("2")
    return f"file://{path}", first


@pytest.mark.parametrize("ref, version", [("", "2"), ("dev", "3"), ("v1", "1"), ("first", "1")])
def test_the_checkout_is_of_the_ref_asked_for_without_its_history(repo, tmp_path, ref, version):
    url, first = repo
    dest = tmp_path / "checkout"

    git.clone(url, first if ref == "first" else ref, dest, timeout=30, max_bytes=10_000)

    assert (dest / "version").read_text() == version
    assert not (dest / ".git").exists()


def test_a_ref_the_repo_lacks_fails_and_says_so(repo, tmp_path):
    with pytest.raises(git.GitError, match="no-such-branch"):
        git.clone(repo[0], "no-such-branch", tmp_path / "checkout", timeout=30, max_bytes=10_000)


def test_a_repo_over_the_size_limit_is_refused(repo, tmp_path):
    with pytest.raises(git.GitError, match="over the 0 byte limit"):
        git.clone(repo[0], "", tmp_path / "checkout", timeout=30, max_bytes=0)
