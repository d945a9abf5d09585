"""The router reaches other apps through their services and selectors, never their views."""

import ast
from pathlib import Path

ROUTER = Path(__file__).resolve().parents[2] / "router"
APPS = ("belvedir", "billing", "harnesses", "models_registry", "runs", "traces")


def _is_view_module(name: str) -> bool:
    app, _, rest = name.partition(".")
    leaf = rest.rsplit(".", 1)[-1]
    return app in APPS and (leaf in ("views", "api") or leaf.endswith(("_views", "_api")))


def test_the_router_imports_no_other_apps_views():
    found = []
    for path in ROUTER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if _is_view_module(n)]
    assert found == []
