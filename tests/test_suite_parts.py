"""scripts/test.sh's two parts: the unmarked tests run with no engine to talk to, so a test
that uses the engine without `@pytest.mark.docker` fails there instead of racing the others."""

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.engines import NO_ENGINE

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = (ROOT / "scripts/test.sh").read_text()


def test_part_one_runs_the_unmarked_tests_in_parallel_against_no_engine():
    assert re.search(r"^NO_ENGINE=(\S+)", SCRIPT, re.M).group(1) == NO_ENGINE
    assert 'DOCKER_HOST=$NO_ENGINE pytest_part -m "not (docker or slow)" -n 2' in SCRIPT
    # Part 2: on the engine, one at a time.
    assert 'pytest_part -m "docker or slow" --durations' in SCRIPT


def test_an_engine_call_under_part_ones_docker_host_fails():
    assert not Path(NO_ENGINE.removeprefix("unix://")).exists()
    probe = "import docker; docker.from_env().ping()"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "DOCKER_HOST": NO_ENGINE},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "No such file or directory" in done.stderr
