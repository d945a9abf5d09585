"""Adversarial tests of sandbox isolation: the runs fixtures (harness repos, launch) reused."""

from tests.runs.conftest import (  # noqa: F401  (fixtures)
    contract_repo,
    fast_password_hashing,
    launch,
    make_harness,
)
