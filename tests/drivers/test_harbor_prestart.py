"""Harbor started ahead of its command line (belvedir_harbor.prestart), on the host with a
stand-in `harbor` console script: it runs with the argv the driver hands it, as `harbor ...`
would (its own exit code, its output, the environment it was started with), and never runs
when the driver stops first. Under Harbor itself: the run command's end to end in
tests/drivers/test_harbor_agent.py."""

import json
import os
import sys

from tests.drivers.helpers import HARBOR

from belvedir_harbor.prestart import Prestarted, interpreter  # isort: skip

SCRIPT = """import json, os, sys
from pathlib import Path
Path(os.environ["SEEN"]).write_text(json.dumps({"argv": sys.argv, "path0": sys.path[0],
                                               "flag": os.environ.get("FLAG")}))
print("harbor stand-in ran", flush=True)
sys.exit(7)
"""


def stand_in(tmp_path, shebang: str):
    script = tmp_path / "bin" / "harbor"
    script.parent.mkdir()
    script.write_text(f"#!{shebang}\n{SCRIPT}")
    script.chmod(0o755)
    seen = tmp_path / "seen.json"
    env = {**os.environ, "PYTHONPATH": str(HARBOR), "SEEN": str(seen), "FLAG": "on"}
    return str(script), seen, env


def test_the_prestarted_harbor_runs_the_argv_it_is_handed_as_the_script_would(tmp_path, capfd):
    script, seen, env = stand_in(tmp_path, sys.executable)

    early = Prestarted.start(script, env)
    assert early is not None
    code = early.run(["harbor", "run", "-p", "/x y", "-n", "4"])

    assert code == 7
    got = json.loads(seen.read_text())
    assert got["argv"] == [script, "run", "-p", "/x y", "-n", "4"]
    assert got["path0"] == str(tmp_path / "bin")  # the script's folder, as when run itself
    assert got["flag"] == "on"
    assert "harbor stand-in ran" in capfd.readouterr().out


def test_a_driver_that_stops_first_never_runs_harbor(tmp_path):
    script, seen, env = stand_in(tmp_path, sys.executable)

    early = Prestarted.start(script, env)
    assert early is not None
    early.cancel()

    assert early.process.returncode == 0
    assert not seen.exists()


def test_a_script_without_a_plain_interpreter_is_run_as_usual(tmp_path):
    script, _, env = stand_in(tmp_path, f"/usr/bin/env {os.path.basename(sys.executable)}")

    assert interpreter(script) is None
    assert Prestarted.start(script, env) is None
    assert interpreter(str(tmp_path / "missing")) is None
    shell = tmp_path / "bin" / "shell"
    shell.write_text("#!/bin/sh\necho hi\n")
    assert interpreter(str(shell)) is None
