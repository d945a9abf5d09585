"""The checks several apps share are defined once and behave the same everywhere."""

import pytest

from belvedir.validators import has_unstorable, storable


@pytest.mark.parametrize("text", ["a\x00b", "lone \ud800 high", "lone \udfff low"])
def test_nul_and_lone_surrogates_are_unstorable_and_become_replacement_characters(text):
    assert has_unstorable(text)
    cleaned = storable(text)
    assert not has_unstorable(cleaned)
    assert "\ufffd" in cleaned and len(cleaned) == len(text)


def test_ordinary_text_including_astral_characters_is_storable_and_kept():
    text = "plain, accents é, emoji 🙂, CJK 漢字"
    assert not has_unstorable(text)
    assert storable(text) == text


def test_the_launch_form_the_api_and_the_service_share_one_attempts_limit():
    from runs.api import RunLaunchSerializer
    from runs.forms import LaunchForm
    from runs.models import MAX_ATTEMPTS

    form = LaunchForm({"attempts": MAX_ATTEMPTS + 1, "grading": "pass@1"})
    assert not form.is_valid() and "attempts" in form.errors
    assert LaunchForm({"attempts": MAX_ATTEMPTS, "grading": "pass@1"}).is_valid()
    data = RunLaunchSerializer(data={"harness": "har_x", "attempts": MAX_ATTEMPTS + 1})
    assert not data.is_valid() and "attempts" in data.errors
    assert RunLaunchSerializer(data={"harness": "har_x", "attempts": MAX_ATTEMPTS}).is_valid()


def test_the_service_refuses_attempts_past_the_shared_limit(owner, harness):
    from belvedir.errors import DomainError
    from runs import services
    from runs.models import MAX_ATTEMPTS

    with pytest.raises(DomainError) as refused:
        services.run_launch(
            project=owner.project,
            harness=harness,
            created_by=owner.user,
            attempts=MAX_ATTEMPTS + 1,
        )
    assert refused.value.field == "attempts"
    assert str(MAX_ATTEMPTS) in refused.value.message


def test_a_harness_env_value_with_a_nul_is_refused_by_the_shared_check():
    from belvedir.errors import DomainError
    from harnesses.policy import validate_env

    with pytest.raises(DomainError) as refused:
        validate_env({"TOKEN": "abc\x00def"})
    assert refused.value.field == "env" and "NUL" in refused.value.message
