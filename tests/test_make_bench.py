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


def test_the_task_build_benchmark_passes_every_argument_ensure_image_requires():
    """bench/task_build.py follows ensure_image's signature (the same script measures the
    build before and after issue 21): a required argument it does not know fails here, not
    after the benchmark has built the buildah image."""
    import inspect
    import sys

    sys.path.append(str(ROOT / "bench"))
    try:
        import task_build
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from sandboxes.tasks import ensure_image

    platform = task_build.Platform(None, ROOT / "context.tar.gz", "runsc", "belvedir-sandbox")
    fields = {"context": platform.context, "tag": "t", "timeout": 1, "force": False}
    inspect.signature(ensure_image).bind(None, **fields, steps=platform.steps, **platform.extra)
