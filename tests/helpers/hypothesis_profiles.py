"""Hypothesis profiles, registered in one place and loaded by tests/conftest.py.

- `ci`: every property test runs its full count of examples (the count each test names).
- `dev`: at most 25 examples a test, so a local `make test` stays quick.

`HYPOTHESIS_PROFILE` picks one by name; otherwise `CI=true` (or 1) picks `ci` and anything else
`dev`. `.ci/run` sets `CI=true`.
"""

import os

from hypothesis import settings

DEV_EXAMPLES = 25

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=DEV_EXAMPLES)


def profile_name(environ=os.environ) -> str:
    chosen = environ.get("HYPOTHESIS_PROFILE", "").strip()
    if chosen:
        return chosen
    return "ci" if environ.get("CI", "").strip().lower() in ("true", "1") else "dev"


def load_profile() -> str:
    name = profile_name()
    settings.load_profile(name)
    return name


def examples(full: int) -> int:
    """A property test's example count: `full` under `ci`, the profile's smaller cap elsewhere."""
    if settings.get_current_profile_name() == "ci":
        return full
    return min(full, settings().max_examples)
