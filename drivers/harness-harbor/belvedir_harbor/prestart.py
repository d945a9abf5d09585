"""Harbor started before its command line is known: `python3 -m belvedir_harbor.run` starts
Harbor's interpreter at once, which imports Harbor and builds its command-line interface
(1.5-2.5 s under gVisor, bench/README.md) while the driver fetches the dataset, then runs the
`harbor` console script with the argv the driver hands it on a pipe, as `harbor ...` would.

    python -m belvedir_harbor.prestart FD SCRIPT    # Harbor's interpreter; argv (JSON) on FD

Nothing on the pipe (the driver stopped first): it exits 0 without running anything. The
driver side is the standard library only (`Prestarted`); Harbor is imported only in the
child.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys


def interpreter(script: str) -> str | None:
    """The Python interpreter of a console script (its `#!` line), None unless it names one
    executable `python...` with no arguments (a shell script, `env python3`: run as usual)."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) != 1 or not os.path.basename(words[0]).startswith("python"):
        return None
    return words[0] if os.access(words[0], os.X_OK) else None


class Prestarted:
    """A Harbor process waiting for its argv (`run`), or for nothing (`cancel`)."""

    def __init__(self, process: subprocess.Popen, pipe: int, script: str):
        self.process, self.pipe, self.script = process, pipe, script

    @classmethod
    def start(cls, script: str, env: dict[str, str]) -> Prestarted | None:
        """Harbor's interpreter importing Harbor, with `env`; None where the script names
        no plain interpreter or it cannot start (then run `harbor` as usual)."""
        python = interpreter(script)
        if python is None:
            return None
        read, write = os.pipe()
        try:
            process = subprocess.Popen(
                [python, "-m", "belvedir_harbor.prestart", str(read), script],
                env=env,
                pass_fds=(read,),
            )
        except OSError:
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(process, write, script)

    def run(self, command: list[str]) -> int:
        """Harbor runs `command` (`harbor ...`); its exit code."""
        try:
            os.write(self.pipe, json.dumps([self.script, *command[1:]]).encode())
        finally:
            os.close(self.pipe)
        return self.process.wait()

    def cancel(self) -> None:
        os.close(self.pipe)
        self.process.wait()


def _ahead() -> None:
    """Import Harbor and build its command, which `app()` would build again (typer's
    get_command), so the run starts at the command's own work."""
    import typer.main
    from harbor.cli.main import app

    built = typer.main.get_command(app)
    build = typer.main.get_command
    typer.main.get_command = lambda typer_app: built if typer_app is app else build(typer_app)


def main() -> None:
    pipe, script = int(sys.argv[1]), sys.argv[2]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as running the script has it
    try:
        _ahead()
    except Exception:  # the script itself, run as usual, says what is wrong
        pass
    with os.fdopen(pipe, "rb") as given:
        data = given.read()
    if not data:
        sys.exit(0)
    sys.argv = json.loads(data)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
