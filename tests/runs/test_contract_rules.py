"""The results.json rules on inputs built to break a parser (no Docker needed)."""

import json

import pytest

from runs.contract import judge_results


def test_a_huge_integer_score_fails_with_the_over_100_note_not_a_crash():
    outcome = judge_results(b'{"score": ' + b"9" * 400 + b"}", exit_code=0, launch_model="")
    assert not outcome.succeeded
    assert outcome.notes == ["belvedir: the score 999999999999…(400 digits) is over 100."]


def test_deeply_nested_results_fail_as_invalid_json_not_a_crash():
    outcome = judge_results(b"[" * 3000, exit_code=0, launch_model="")
    assert not outcome.succeeded
    assert outcome.notes == ["belvedir: results.json is not valid JSON (nested too deeply)."]


def test_nan_and_infinity_beside_a_valid_score_are_stored_as_strings_with_a_note():
    outcome = judge_results(
        b'{"score": 0.5, "x": NaN, "y": [-Infinity]}', exit_code=0, launch_model=""
    )
    assert outcome.succeeded and outcome.score == 0.5
    assert outcome.results == {"score": 0.5, "x": "NaN", "y": ["-Infinity"]}
    assert "stored as strings" in outcome.notes[0]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_a_non_finite_score_fails_and_the_results_stay_storable(literal):
    outcome = judge_results(b'{"score": ' + literal + b"}", exit_code=0, launch_model="")
    assert not outcome.succeeded
    assert outcome.results["score"] == literal.decode()


def test_secrets_are_redacted_from_every_string_of_a_json_value_as_written():
    from runs.contract import redact_json, redact_text, secrets_for_redaction

    secrets = secrets_for_redaction(['pa"ss\\wörd', "abc", "", "tok-123456"])
    # As written, as repr and JSON escape it; too short and blank ones left out.
    assert set(secrets) == {
        'pa"ss\\wörd',
        'pa"ss\\\\wörd',
        'pa\\"ss\\\\w\\u00f6rd',
        "tok-123456",
    }
    value = {"model": 'x pa"ss\\wörd', "tok-123456": [1, {"k": "tok-123456!"}], "n": 2.5}
    assert redact_json(value, secrets) == {
        "model": "x [redacted]",
        "[redacted]": [1, {"k": "[redacted]!"}],
        "n": 2.5,
    }
    secret = 'pa"ss\\wörd'
    assert redact_text(f"reported model {secret!r}", secrets) == "reported model '[redacted]'"
    assert redact_text(json.dumps({"pw": secret}), secrets) == '{"pw": "[redacted]"}'


def test_a_served_drivers_last_word_becomes_a_note_and_no_other_harness_can_speak_for_it():
    from runs.contract import driver_note

    log = (
        "belvedir-harbor: harbor run -y ...\nsome output\n"
        "belvedir-harbor: HARBOR_DATASET 'terminal-bench@2.1' is a Harbor registry dataset, "
        "and the registry cannot be reached from here: registry datasets need an online "
        "install.\n[belvedir] install failed\n"
    )
    assert driver_note(log, "harness-harbor") == (
        "belvedir: the harness-harbor driver said: HARBOR_DATASET 'terminal-bench@2.1' is a "
        "Harbor registry dataset, and the registry cannot be reached from here: registry "
        "datasets need an online install."
    )
    assert driver_note(log, None) == ""  # not a served driver: its output stays in the log
    assert driver_note("nothing said\n", "harness-harbor") == ""


def test_a_capped_run_says_it_ran_n_of_m_tasks():
    capped = {"score": 1.0, "n_tasks": 5, "n_tasks_total": 20, "task_limit": "HARBOR_N_TASKS=5"}
    outcome = judge_results(json.dumps(capped).encode(), exit_code=0, launch_model="")
    assert outcome.succeeded and outcome.notes == [
        "belvedir: ran 5 of 20 tasks (HARBOR_N_TASKS=5)."
    ]
    for whole in ({"score": 1.0, "n_tasks": 20, "n_tasks_total": 20}, {"score": 1.0, "n_tasks": 5}):
        assert judge_results(json.dumps(whole).encode(), exit_code=0, launch_model="").notes == []
