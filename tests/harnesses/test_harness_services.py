"""Harness services take each field as a keyword argument; None means "not given"."""

import pytest

from belvedir.errors import DomainError
from harnesses import services


def test_update_changes_only_the_fields_given_and_keeps_the_rest(harness):
    services.harness_update(harness=harness, ref="v2", run_command="python other.py")
    harness.refresh_from_db()
    assert (harness.ref, harness.run_command) == ("v2", "python other.py")
    assert harness.name == "Smoke" and harness.env == {"MODEL": "openai/gpt-4.1-mini"}


def test_update_with_a_blank_field_clears_it(harness):
    services.harness_update(harness=harness, install_command="", env={})
    harness.refresh_from_db()
    assert harness.install_command == "" and harness.env == {}


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_create_from_a_preset_fills_fields_not_given_and_keeps_blank_ones_blank(owner):
    preset = services.harness_defaults_from_preset("gaia")
    harness = services.harness_create(project=owner.project, preset="gaia", ref="")
    assert harness.name == preset["name"] and harness.run_command == preset["run_command"]
    assert harness.ref == "" and harness.preset == "gaia"


def test_create_refuses_a_missing_run_command_naming_the_field(owner):
    with pytest.raises(DomainError) as refused:
        services.harness_create(
            project=owner.project, name="No run", repo_url="https://github.com/a/b.git"
        )
    assert refused.value.field == "run_command"


def test_validate_names_a_taken_name_in_the_project(owner, harness):
    with pytest.raises(DomainError) as refused:
        services.harness_validate(
            project=owner.project,
            name="Smoke",
            repo_url="https://github.com/a/b.git",
            run_command="true",
        )
    assert refused.value.field == "name"
