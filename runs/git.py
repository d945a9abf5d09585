"""git, the one external tool runs need on the worker's side: ls-remote and a shallow clone.

Every failure is a `GitError` whose message is fit to show a user: credentials in URLs are
masked, git never prompts (a repo that needs access we lack fails fast), and only the line
of git's stderr that says why is kept.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
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


def git_env() -> dict[str, str]:
    """Never prompt for credentials; only https, ssh, git and file transports."""
    return {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/true",
        "SSH_ASKPASS": "/bin/true",
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
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


def clone(repo_url: str, ref: str, dest: Path, *, timeout: float, max_bytes: int) -> None:
    """A shallow checkout of `ref` (default branch when empty) into new directory `dest`,
    without its .git; GitError past `timeout` s per step or `max_bytes` of files."""
    dest.mkdir(parents=True)
    try:
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
    shutil.rmtree(dest / ".git", ignore_errors=True)
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file() and not f.is_symlink())
    if size > max_bytes:
        raise GitError(f"the repo is {size:,} bytes, over the {max_bytes:,} byte limit")


def _git(args: list[str], cwd: Path, timeout: float) -> None:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=git_env()
    )
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {error_reason(done.stderr, 'failed')}")
