"""The code stays easy to read: no module of the platform, its drivers, SDKs or scripts is over
500 lines (style.md: split a module by topic as it passes ~500). Tests and benchmarks have their
own check (tests/test_test_layout.py); migrations are written by makemigrations."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500
LEFT_OUT = {"tests", "bench", "migrations", "node_modules", "dist", ".venv", ".git", "staticfiles"}
SOURCE = {".py", ".ts", ".mjs", ".js", ".sh"}


def _modules() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*")
        if path.suffix in SOURCE
        and path.is_file()
        and not LEFT_OUT.intersection(path.relative_to(ROOT).parts)
    )


def test_no_module_is_over_500_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules()
        if (n := len(path.read_text(errors="replace").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_check_reads_the_apps_the_sandbox_engine_drivers_and_sdk():
    read = {path.relative_to(ROOT).parts[0] for path in _modules()}
    assert {"belvedir", "runs", "harbor", "sandboxes", "router", "drivers", "sdk"} <= read
