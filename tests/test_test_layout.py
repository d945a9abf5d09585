"""The test suite stays easy to read: short modules, helpers in helper modules, fixtures in conftests."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500


def _modules(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_no_test_or_bench_module_is_over_500_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules("tests", "bench")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_module_imports_from_a_conftest():
    offenders = []
    for path in _modules("tests", "bench"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if "conftest" in n]
    assert offenders == []


def test_conftests_define_only_fixtures_and_hooks():
    stray = []
    for path in (ROOT / "tests").rglob("conftest.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef):
                continue
            decorated = any("fixture" in ast.unparse(d) for d in node.decorator_list)
            if not (decorated or node.name.startswith("pytest_")):
                stray.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert stray == []
