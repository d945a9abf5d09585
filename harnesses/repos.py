"""A harness's repo checked out for a run, on the worker's side (credentials never enter the
sandbox)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from belvedir import git
from belvedir.errors import Invalid
from harnesses import drivers, policy


def clone_repo(repo_url: str, ref: str, dest: Path) -> str:
    """A shallow checkout at the ref, within the clone time and size limits (GitError); the
    commit.

    The repo URL is checked once more first: its host may resolve to an internal address now."""
    try:
        policy.validate_repo_url(repo_url)
    except Invalid as exc:
        raise git.GitError(exc.message) from None
    try:
        source = drivers.clone_source(repo_url)  # a served driver: the worker's own bare copy
    except drivers.DriverError as exc:
        raise git.GitError(str(exc)) from None
    return git.clone(
        source,
        ref,
        dest,
        timeout=settings.BELVEDIR_CLONE_TIMEOUT,
        max_bytes=settings.BELVEDIR_REPO_MAX_BYTES,
    )
