"""git, the one external tool runs need on the worker's side: ls-remote and a shallow clone.

Every failure is a `GitError` whose message is fit to show a user: credentials in URLs are
masked, git never prompts (a repo that needs access we lack fails fast), and only the line
of git's stderr that says why is kept.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_URL_CREDENTIALS = re.compile(r"(://)[^/@\s]+@")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


class GitError(Exception):
    """git could not do it; the message names the repo without credentials and says why."""


def without_credentials(text: str) -> str:
    """URLs in `text` with any user:password@ taken out, for messages users and logs see."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)


def error_reason(stderr: str, default: str = "no answer") -> str:
    """The line of git's stderr that says why: the first `fatal:` line, else the last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    fatal = [line.removeprefix("fatal:").strip() for line in lines if line.startswith("fatal:")]
    return without_credentials((fatal or lines or [default])[0 if fatal else -1][:300])


def is_commit(ref: str) -> bool:
    """Whether `ref` looks like a commit id (7 to 40 hex digits) rather than a branch or tag."""
    return bool(_SHA.match(ref))


# The worker's own variables git may keep: PATH, locale, and the proxy and CA settings the
# machine needs to reach repos. Nothing else: no HOME, no SSH agent, no GIT_* of the worker's.
_KEPT_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
    "no_proxy",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
)


@functools.cache
def _empty_home() -> str:
    """An empty directory of the worker's own, git's HOME: no ~/.gitconfig, ~/.ssh or
    ~/.git-credentials of the worker's is ever read."""
    return tempfile.mkdtemp(prefix="belvedir-git-home-")


def git_env() -> dict[str, str]:
    """A clean environment for git: it never prompts, reads no system or user config, uses no
    credential helper, SSH key, SSH config or agent of the worker's; only the https, ssh, git
    and file transports. PATH and the proxy and CA variables are kept."""
    home = _empty_home()
    if not os.path.isdir(home):  # a /tmp cleaner took it
        _empty_home.cache_clear()
        home = _empty_home()
    return {
        **{name: os.environ[name] for name in _KEPT_ENV if name in os.environ},
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/true",
        "SSH_ASKPASS": "/bin/true",
        "GIT_SSH_COMMAND": (
            "ssh -F /dev/null -o IdentitiesOnly=yes -o IdentityFile=none -o IdentityAgent=none"
            " -o BatchMode=yes"
            f" -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={home}/known_hosts"
        ),
        "GIT_ALLOW_PROTOCOL": "https:ssh:git:file",
    }


def ls_remote(repo_url: str, ref: str = "", *, timeout: float) -> str:
    """`git ls-remote` of the repo (narrowed to `ref` when it is a branch or tag): its output.

    Raises GitError when the repo does not answer in `timeout` s or cannot be read.
    """
    args = ["git", "ls-remote", "--", repo_url]
    if ref and not is_commit(ref):
        args.append(ref)
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=git_env())
    except subprocess.TimeoutExpired:
        raise GitError(
            f"The repo {without_credentials(repo_url)} did not answer within {timeout:g} s."
        ) from None
    if done.returncode != 0:
        raise GitError(
            f"The repo {without_credentials(repo_url)} cannot be read: {error_reason(done.stderr)}"
        )
    return done.stdout


def clone(repo_url: str, ref: str, dest: Path, *, timeout: float, max_bytes: int) -> str:
    """A shallow checkout of `ref` (default branch when empty) into new directory `dest`,
    without its .git; the commit checked out. GitError past `timeout` s per step or
    `max_bytes` of files."""
    dest.mkdir(parents=True)
    try:
        # The usual case, a branch, a tag or the default branch, in one git process; a commit
        # or another kind of ref takes the steps below.
        if not is_commit(ref) and _clone_shallow(repo_url, ref, dest, timeout):
            return _check_size(dest, max_bytes, timeout)
        _git(["init", "-q"], dest, timeout)
        _git(["remote", "add", "origin", repo_url], dest, timeout)
        try:
            _git(["fetch", "-q", "--depth", "1", "origin", ref or "HEAD"], dest, timeout)
        except GitError:
            if not ref:
                raise
            _git(["fetch", "-q", "origin"], dest, timeout)  # a commit not fetchable by itself
            _git(["checkout", "-q", ref], dest, timeout)
        else:
            _git(["checkout", "-q", "FETCH_HEAD"], dest, timeout)
    except subprocess.TimeoutExpired:
        raise GitError(
            f"cloning {without_credentials(repo_url)} took longer than {timeout:g} s"
        ) from None
    return _check_size(dest, max_bytes, timeout)


def _clone_shallow(repo_url: str, ref: str, dest: Path, timeout: float) -> bool:
    """`git clone --depth 1 [--branch ref]` into the empty `dest`; False (and `dest` empty
    again) if git refused, so the caller can fetch the ref by itself."""
    branch = ["--branch", ref] if ref else []
    try:
        _git(
            ["clone", "-q", "--depth", "1", "--no-tags", *branch, "--", repo_url, "."],
            dest,
            timeout,
        )
    except GitError:
        for entry in dest.iterdir():
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        return False
    return True


def _check_size(dest: Path, max_bytes: int, timeout: float) -> str:
    """The commit checked out in `dest`, whose .git is then removed, and whose files must
    stay within `max_bytes`."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=dest,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=git_env(),
    )
    shutil.rmtree(dest / ".git", ignore_errors=True)
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file() and not f.is_symlink())
    if size > max_bytes:
        raise GitError(f"the repo is {size:,} bytes, over the {max_bytes:,} byte limit")
    return head.stdout.strip() if head.returncode == 0 else ""


def _git(args: list[str], cwd: Path, timeout: float) -> None:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=git_env()
    )
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {error_reason(done.stderr, 'failed')}")
