"""What a local dataset's task directories say about their tasks: each task's group, and the
Harbor agents their images already hold."""

from __future__ import annotations

import tomllib
from pathlib import Path


def task_groups(dataset_path: Path | None) -> dict[str, str]:
    """Task name → group, from each task.toml's `[metadata] group` (the platform's export
    writes a task's `metadata.group` there, docs/tasks-format.md). The name is Harbor's:
    `[task] name`, else the directory's. A registry dataset (no local path), a task without a
    group or a task.toml that does not parse: no entry."""
    if dataset_path is None or not dataset_path.is_dir():
        return {}
    groups = {}
    for config in sorted(dataset_path.glob("*/task.toml")):
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        group = (document.get("metadata") or {}).get("group")
        if isinstance(group, bool) or not isinstance(group, str | int | float):
            continue
        task = document.get("task")
        name = task.get("name") if isinstance(task, dict) else None
        groups[str(name or config.parent.name)] = str(group)
    return groups


# The platform's export names the Harbor agents its base image holds here (an operator's
# BELVEDIR_EXPORT_BASE_AGENTS, comma-separated), in every task.toml's [metadata].
AGENTS_INSTALLED = "agents_installed"


def agents_installed(dataset_path: Path | None) -> frozenset[str]:
    """The Harbor agents every task's image already holds, by their task.toml's `[metadata]
    agents_installed`: an agent named by each task (none for a registry dataset, a dataset
    without tasks, or any task that names none or whose task.toml does not parse)."""
    if dataset_path is None or not dataset_path.is_dir():
        return frozenset()
    found = None
    for config in sorted(dataset_path.glob("*/task.toml")):
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return frozenset()
        named = (document.get("metadata") or {}).get(AGENTS_INSTALLED)
        names = (
            {n.strip() for n in named.split(",") if n.strip()} if isinstance(named, str) else set()
        )
        found = names if found is None else found & names
    return frozenset(found or ())
