"""Tracing with the belvedir SDK when it is installed; a no-op (with a note) when it is not."""

from __future__ import annotations

import contextlib
import os
import sys


class Tracing:
    """initialize() once, then `task(run_id, name)` around each task (in its own thread)."""

    def __init__(self, env=None) -> None:
        env = os.environ if env is None else env
        self.sdk = None
        self.status = "off"
        self.run_id = env.get("BELVEDIR_RUN_ID") or env.get("FRACTAL_RUN_ID") or ""
        key = env.get("BELVEDIR_API_KEY") or env.get("FRACTAL_API_KEY")
        base = env.get("BELVEDIR_BASE_URL") or env.get("FRACTAL_BASE_URL")
        if not (key and base and self.run_id):
            self.status = "off: BELVEDIR_API_KEY, BELVEDIR_BASE_URL or BELVEDIR_RUN_ID not set"
            return
        try:
            import belvedir  # the SDK (PyPI belvedir)

            belvedir.initialize(api_key=key, base_url=base, app_name="belvedir-runner")
        except Exception as exc:  # ImportError, or an SDK that fails to start
            self.status = f"off: the belvedir SDK is not available ({type(exc).__name__}: {exc})"
            note(f"tracing {self.status}; the run is not traced.")
            return
        self.sdk = belvedir
        self.status = "sdk"

    def task(self, name: str):
        """The SDK's session (the run id) and task around one task, or nothing."""
        if self.sdk is None:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(self.sdk.session(session_id=self.run_id))
        stack.enter_context(self.sdk.task(name))
        return stack

    def finish(self, success: bool) -> None:
        """Flush the spans, then report the run's outcome."""
        if self.sdk is None:
            return
        try:
            self.sdk.flush()
            self.sdk.report_outcome(self.run_id, "success" if success else "fail")
        except Exception as exc:
            # "spans dropped": the platform marks the run's traces incomplete on these words.
            note(
                f"tracing: flushing the spans failed ({type(exc).__name__}: {exc}); spans dropped."
            )


def note(message: str) -> None:
    print(f"belvedir-runner: {message}", file=sys.stderr, flush=True)
