"""What a local dataset's task directories say about their tasks: each task's group."""

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
