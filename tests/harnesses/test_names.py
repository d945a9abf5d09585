"""One name rule for harnesses, environments and environment generations
(harnesses.policy.validate_name): stripped, at most the model field's length, required except
for a generation (which names its environment later)."""

import pytest

from belvedir.errors import Invalid
from harnesses import environments, generation, policy, services
from harnesses.environments import environment_create
from harnesses.generation import generation_start
from harnesses.services import harness_validate

pytestmark = pytest.mark.django_db


def test_the_rule_strips_requires_and_caps_the_name():
    assert policy.validate_name("  Support  ", max_chars=7) == "Support"
    assert policy.validate_name(None, max_chars=7, required=False) == ""
    with pytest.raises(Invalid, match="^name is required.$") as refused:
        policy.validate_name("   ", max_chars=7)
    assert refused.value.field == "name"
    with pytest.raises(Invalid, match="^name must be at most 7 characters.$"):
        policy.validate_name("Support!", max_chars=7)


def writers(owner) -> dict:
    """Each writer with its name's limit, called with everything else valid."""
    return {
        "harness": (
            services.NAME_MAX_CHARS,
            lambda name: harness_validate(
                project=owner.project,
                name=name,
                repo_url="https://github.com/example/bench",
                run_command="python run.py",
            ),
        ),
        "environment": (
            environments.NAME_MAX_CHARS,
            lambda name: environment_create(
                project=owner.project, name=name, tasks=["What is 2+2?"]
            ),
        ),
        "generation": (
            generation.NAME_MAX_CHARS,
            lambda name: generation_start(
                project=owner.project, description="arithmetic", model="x/y", name=name
            ),
        ),
    }


def test_each_writer_refuses_a_name_past_its_fields_length(owner):
    for what, (limit, write) in writers(owner).items():
        with pytest.raises(Invalid, match=f"name must be at most {limit} characters") as refused:
            write("x" * (limit + 1))
        assert refused.value.field == "name", what


def test_a_blank_name_is_refused_except_for_a_generation(owner):
    for what, (_, write) in writers(owner).items():
        try:
            write("   ")
        except Invalid as refused:
            named = refused.field
        else:
            named = None
        assert (named == "name") is (what != "generation"), (what, named)
