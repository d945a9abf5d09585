"""The floors hold: no import and no foreign key points from a lower app to a higher one.

The floors are the layers contract in pyproject.toml (router on top, core at the ground);
these tests read them from there, so the import contracts and the model check never disagree.
"""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def floors() -> dict[str, int]:
    """App label → floor number (0 = the ground), from the layers contract."""
    (layers,) = (c["layers"] for c in _contracts() if c["type"] == "layers")
    return {
        app.strip(): floor
        for floor, layer in enumerate(reversed(layers))
        for app in layer.split("|")
    }


def upward_relations(models, floor_of: dict[str, int]) -> list[str]:
    """Every foreign key, one-to-one or many-to-many from a model to one on a higher floor."""
    found = []
    for model in models:
        here = floor_of.get(model._meta.app_label)
        if here is None:
            continue
        for field in model._meta.get_fields():
            if not field.is_relation or field.auto_created or field.related_model is None:
                continue  # reverse accessors are the other side's field
            target = field.related_model._meta.app_label
            if floor_of.get(target, -1) > here:
                found.append(
                    f"{model._meta.label}.{field.name} -> {field.related_model._meta.label}"
                )
    return found


def _is_project_app(path: str) -> bool:
    """An app whose code is in this repository, not in a virtualenv kept inside it (`.venv`)."""
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(ROOT):
        return False
    parts = resolved.relative_to(ROOT).parts
    return not any(part.startswith(".") or part == "site-packages" for part in parts)


def test_every_project_app_stands_on_a_floor():
    project_apps = {
        config.label for config in apps.get_app_configs() if _is_project_app(config.path)
    }
    assert project_apps == set(floors())


def test_the_floors_go_core_registry_and_billing_harnesses_runs_traces_router():
    assert floors() == {
        "belvedir": 0,
        "models_registry": 1,
        "billing": 1,
        "harnesses": 2,
        "runs": 3,
        "traces": 4,
        "harbor": 4,
        "scores": 4,
        "router": 5,
    }


def test_no_model_points_a_relation_up_to_a_higher_floor():
    assert upward_relations(apps.get_models(), floors()) == []


def test_the_relation_check_finds_a_relation_that_points_up():
    upside_down = {app: -floor for app, floor in floors().items()}

    found = upward_relations(apps.get_models(), upside_down)

    assert "runs.Run.project -> belvedir.Project" in found
    assert "traces.Span.run -> runs.Run" in found


def test_the_import_contracts_are_kept():
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_core_migrations_do_not_depend_on_runs():
    for migration in (ROOT / "belvedir" / "migrations").glob("0*.py"):
        assert "'runs'" not in migration.read_text(), migration.name


def test_no_import_is_let_past_the_floors():
    (layers,) = (c for c in _contracts() if c["type"] == "layers")

    assert layers.get("ignore_imports", []) == []


def test_the_root_urlconf_imports_no_app():
    tree = ast.parse((ROOT / "belvedir" / "urls.py").read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    apps_above_the_ground = set(floors()) - {"belvedir"}

    assert {name.split(".")[0] for name in imported} & apps_above_the_ground == set()
