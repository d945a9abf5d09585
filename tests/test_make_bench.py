"""`make bench` runs every benchmark in bench/ (speed targets live there, not in tests)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench_recipe() -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("bench:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_bench_runs_every_benchmark_script():
    scripts = {path.name for path in (ROOT / "bench").glob("*.py") if not path.name.startswith("_")}
    run = {match for line in _bench_recipe() for match in re.findall(r"bench/(\w+\.py)", line)}

    assert "install_step.py" in scripts
    assert run == scripts
