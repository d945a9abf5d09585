"""The settings stay one source grouped by topic: belvedir/settings/, a module per topic."""

import ast
from pathlib import Path

from django.conf import settings

import belvedir.settings

PACKAGE = Path(belvedir.settings.__file__).parent


def _topics() -> dict[str, ast.Module]:
    return {
        path.stem: ast.parse(path.read_text())
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "__init__.py"
    }


def _defined(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        names |= {
            t.id
            for t in targets
            if isinstance(t, ast.Name) and t.id.isupper() and not t.id.startswith("_")
        }
    return names


def test_no_settings_module_is_over_500_lines():
    long = {
        path.name: n
        for path in PACKAGE.glob("*.py")
        if (n := len(path.read_text().splitlines())) > 500
    }
    assert long == {}


def test_each_setting_is_defined_in_one_topic():
    seen: dict[str, str] = {}
    twice = []
    for topic, tree in _topics().items():
        for name in _defined(tree):
            if name in seen:
                twice.append(f"{name}: {seen[name]} and {topic}")
            seen[name] = topic
    assert twice == []


def test_every_topic_is_read_by_the_settings_module():
    imported = {
        node.module.rsplit(".", 1)[-1]
        for node in ast.parse((PACKAGE / "__init__.py").read_text()).body
        if isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["*"]
    }
    assert imported == set(_topics())


def test_every_topics_settings_reach_django():
    for topic, tree in _topics().items():
        for name in _defined(tree):
            assert hasattr(settings, name), f"{topic}.{name}"
