"""Property tests run few examples locally and their full count in CI."""

import os

from hypothesis import settings

from tests.helpers.hypothesis_profiles import DEV_EXAMPLES, examples, profile_name


def test_ci_true_picks_the_full_profile():
    assert profile_name({"CI": "true"}) == "ci"
    assert profile_name({"CI": "1"}) == "ci"


def test_without_ci_the_quick_profile_is_used():
    assert profile_name({}) == "dev"
    assert profile_name({"CI": "false"}) == "dev"


def test_hypothesis_profile_names_the_profile_and_wins_over_ci():
    assert profile_name({"HYPOTHESIS_PROFILE": "ci"}) == "ci"
    assert profile_name({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}) == "dev"


def test_the_quick_profile_caps_examples_and_the_full_one_keeps_each_tests_count():
    previous = settings.get_current_profile_name()
    try:
        settings.load_profile("dev")
        assert examples(300) == DEV_EXAMPLES and examples(10) == 10
        settings.load_profile("ci")
        assert examples(300) == 300
    finally:
        settings.load_profile(previous)


def test_this_session_runs_the_profile_its_environment_asks_for():
    assert settings.get_current_profile_name() == profile_name(os.environ)
