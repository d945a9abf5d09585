"""The one task-format validator (harnesses.tasks_format): what it accepts, and every refusal
naming the task (index and id) and the field."""

import json

import pytest

from belvedir.errors import Invalid
from harnesses.tasks_format import MAX_BYTES, dumps, parse_tasks, safe_path, validate_tasks

VERIFY = "def verify(answer, state):\n    return answer.strip() == '4'\n"

ALL_KINDS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A refund after 40 days?",
        "answer": "No; store credit.",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy", "Offers credit"]},
    },
    {"id": "sum", "prompt": "2+2?", "answer": "4", "verifier": {"kind": "code", "source": VERIFY}},
    {
        "id": "config",
        "prompt": "Set debug to false in app/config.ini",
        "verifier": {
            "kind": "state_diff",
            "setup_state": {"app/config.ini": "debug=true\n"},
            "golden": {"app/config.ini": "debug=false\n"},
        },
        "metadata": {"difficulty": "easy"},
    },
]


def test_a_json_list_with_all_four_verifier_kinds_is_accepted_and_normalized():
    tasks = parse_tasks(json.dumps(ALL_KINDS))
    assert [t["verifier"]["kind"] for t in tasks] == ["judge", "rubric", "code", "state_diff"]
    assert tasks[0] == {
        "id": "capital",
        "prompt": "Capital of France?",
        "answer": "Paris",
        "verifier": {"kind": "judge"},
    }
    assert tasks[3]["metadata"] == {"difficulty": "easy"}
    assert tasks[3]["verifier"]["setup_state"] == {"app/config.ini": "debug=true\n"}


def test_jsonl_and_a_tasks_wrapper_read_the_same_tasks():
    jsonl = "\n".join(json.dumps(t) for t in ALL_KINDS) + "\n\n"
    assert parse_tasks(jsonl) == parse_tasks(json.dumps({"tasks": ALL_KINDS}))
    assert parse_tasks(json.dumps(ALL_KINDS[0])) == parse_tasks(json.dumps(ALL_KINDS[:1]))


def test_plain_text_lines_are_judge_tasks_without_a_recorded_answer():
    tasks = parse_tasks("What is 2+2?\n\n  Name a prime above 10.  \n")
    assert tasks == [
        {"id": "task-1", "prompt": "What is 2+2?", "verifier": {"kind": "judge"}},
        {"id": "task-2", "prompt": "Name a prime above 10.", "verifier": {"kind": "judge"}},
    ]


def test_numbers_as_ids_and_answers_read_as_text():
    tasks = validate_tasks([{"id": 7, "prompt": "p", "answer": 42}])
    assert tasks[0]["id"] == "7" and tasks[0]["answer"] == "42"


def test_dumps_round_trips_through_the_parser():
    tasks = parse_tasks(json.dumps(ALL_KINDS))
    assert parse_tasks(dumps(tasks)) == tasks


def refusal(text_or_items) -> Invalid:
    with pytest.raises(Invalid) as caught:
        if isinstance(text_or_items, str):
            parse_tasks(text_or_items)
        else:
            validate_tasks(text_or_items)
    return caught.value


def test_invalid_json_is_refused_with_where_it_broke():
    exc = refusal('[{"id": "a", "prompt": "x"},]')
    assert exc.field == "tasks"
    assert "not valid JSON" in exc.message and "line 1 column" in exc.message


def test_a_broken_jsonl_line_is_refused_with_its_line_number():
    exc = refusal('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": }\n')
    assert exc.field == "tasks"
    assert "line 2" in exc.message and "not valid JSON" in exc.message


def test_over_512_kb_is_refused_before_parsing():
    exc = refusal("x" * (MAX_BYTES + 1))
    assert exc.field == "tasks" and "512 KB" in exc.message


def test_a_task_list_whose_json_passes_512_kb_is_refused():
    items = [{"id": f"t{i}", "prompt": "y" * 1000} for i in range(600)]
    exc = refusal(items)
    assert exc.field == "tasks" and "512 KB" in exc.message


@pytest.mark.parametrize(
    ("task", "field", "words"),
    [
        ({"id": "a", "prompt": "p", "verifier": {"kind": "vibes"}}, "verifier.kind", "'vibes'"),
        ({"id": "a", "prompt": "p", "verifier": "judge"}, "verifier", "must be an object"),
        ({"id": "a", "prompt": "p", "verifier": {"kind": "code"}}, "verifier.source", "required"),
        (
            {"id": "a", "prompt": "p", "verifier": {"kind": "code", "source": "x = 1\n"}},
            "verifier.source",
            "verify(answer, state)",
        ),
        (
            {
                "id": "a",
                "prompt": "p",
                "verifier": {"kind": "code", "source": "def verify(a):\n  1"},
            },
            "verifier.source",
            "wrong parameters",
        ),
        (
            {"id": "a", "prompt": "p", "verifier": {"kind": "code", "source": "def verify(:"}},
            "verifier.source",
            "not valid Python",
        ),
        (
            {"id": "a", "prompt": "p", "verifier": {"kind": "rubric", "criteria": []}},
            "verifier.criteria",
            "non-empty list",
        ),
        (
            {"id": "a", "prompt": "p", "verifier": {"kind": "rubric", "criteria": ["ok", ""]}},
            "verifier.criteria[1]",
            "non-empty text",
        ),
        (
            {"id": "a", "prompt": "p", "verifier": {"kind": "judge", "critera": []}},
            "verifier.critera",
            "not a field of a judge verifier",
        ),
        ({"id": "a", "prompt": "p", "verifier": {"kind": "state_diff"}}, "verifier.golden", ""),
        ({"id": "a", "prompt": ""}, "prompt", "required"),
        ({"id": "a"}, "prompt", "required"),
        ({"id": "a", "prompt": "p", "answer": ["x"]}, "answer", "must be text"),
        ({"id": "a b", "prompt": "p"}, "id", "letters, digits"),
        ({"id": "a", "prompt": "p", "metadata": [3]}, "metadata", "object"),
        ({"id": "a", "prompt": "p", "metadata": "x"}, "metadata", "JSON object"),
    ],
)
def test_a_bad_task_is_refused_naming_the_task_and_the_field(task, field, words):
    items = [{"id": "first", "prompt": "fine"}, task]
    exc = refusal(items)
    assert exc.field == f"tasks[1].{field}"
    assert exc.message.startswith("tasks[1] (id 'a'): ") or task.get("id") != "a"
    assert words in exc.message


def test_a_code_task_without_verify_is_refused_naming_the_task_in_a_file():
    text = json.dumps(
        [{"id": "sum", "prompt": "2+2?", "verifier": {"kind": "code", "source": "print(4)"}}]
    )
    exc = refusal(text)
    assert exc.field == "tasks[0].verifier.source"
    assert "tasks[0] (id 'sum')" in exc.message and "verify(answer, state)" in exc.message


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../up", "a/../../b", "a//b", "./a", "a/", "", "a\\b", "a\x00b", "x" * 300],
)
def test_unsafe_state_paths_are_refused(path):
    task = {
        "id": "s",
        "prompt": "p",
        "verifier": {"kind": "state_diff", "golden": {path: "x"}},
    }
    exc = refusal([task])
    assert exc.field.startswith("tasks[0].verifier.golden[")
    assert "path" in exc.message
    assert safe_path(path) is not None


def test_a_file_path_that_is_also_a_directory_is_refused():
    task = {
        "id": "s",
        "prompt": "p",
        "verifier": {
            "kind": "state_diff",
            "setup_state": {"a": "1", "a/b": "2"},
            "golden": {"c": ""},
        },
    }
    exc = refusal([task])
    assert exc.field == "tasks[0].verifier.setup_state['a/b']"


def test_duplicate_ids_are_refused_naming_both_tasks():
    exc = refusal([{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}])
    assert exc.field == "tasks[1].id" and "tasks[0]" in exc.message


def test_an_empty_file_or_list_holds_no_tasks():
    assert "no tasks" in refusal("  \n").message
    assert "no tasks" in refusal([]).message
    assert refusal({"prompt": "x"}).message == "tasks must be a list of tasks."


def _runner():
    """The Runner's own reader (drivers/belvedir-runner), to check the two agree."""
    import importlib  # noqa: PLC0415

    import tests.drivers.helpers  # noqa: F401, PLC0415 (puts the drivers on sys.path)

    return importlib.import_module("belvedir_runner.tasks")


def test_keys_the_format_does_not_define_are_kept_as_metadata_like_the_runner():
    runner_parse = _runner().parse_text
    text = json.dumps(
        [{"id": "a", "prompt": "P", "difficulty": "hard", "metadata": {"topic": "t"}}]
    )
    (task,) = parse_tasks(text)
    assert task["metadata"] == {"difficulty": "hard", "topic": "t"}
    assert runner_parse(text)[0]["metadata"] == task["metadata"]


def test_jsonl_and_plain_text_lines_mix_line_by_line_like_the_runner():
    runner_parse = _runner().parse_text
    text = '{"id": "a", "prompt": "P", "answer": "A"}\n\nWrite a haiku.\n'
    tasks = parse_tasks(text)
    assert [(t["id"], t["prompt"]) for t in tasks] == [("a", "P"), ("task-2", "Write a haiku.")]
    assert "answer" not in tasks[1] and tasks[1]["verifier"] == {"kind": "judge"}
    assert [t["id"] for t in runner_parse(text)] == [t["id"] for t in tasks]


def test_an_unknown_verifier_key_is_refused_by_the_platform_and_the_runner():
    runner = _runner()
    text = json.dumps([{"id": "x", "prompt": "P", "verifier": {"kind": "judge", "rubric": 1}}])
    with pytest.raises(Invalid) as caught:
        parse_tasks(text)
    assert caught.value.field == "tasks[0].verifier.rubric"
    with pytest.raises(runner.TasksError, match="task x: verifier.rubric is not a field"):
        runner.parse_text(text)


def test_one_object_with_a_prompt_is_a_task_even_with_a_tasks_key_like_the_runner():
    text = json.dumps({"id": "one", "prompt": "P", "tasks": ["x"]})
    (task,) = parse_tasks(text)
    assert task["id"] == "one" and task["metadata"] == {"tasks": ["x"]}
    assert [t["id"] for t in _runner().parse_text(text)] == ["one"]
    with pytest.raises(Invalid, match="must be a list of tasks"):
        parse_tasks(json.dumps({"name": "env", "tasks": "nope"}))


STATE_TASK = {
    "id": "todo",
    "prompt": "Tick the first item.",
    "setup": {"state": {"notes/todo.txt": "[ ] milk\n"}},
    "verifier": {"kind": "state_diff", "golden": {"notes/todo.txt": "[x] milk\n"}},
}


def test_setup_state_is_the_documented_spelling_of_a_state_diff_tasks_files():
    """002 says `setup.state`; `verifier.setup_state` stays an alias. Either reads the same,
    and `setup` is never kept as metadata."""
    (task,) = parse_tasks(json.dumps([STATE_TASK]))
    assert task["verifier"]["setup_state"] == {"notes/todo.txt": "[ ] milk\n"}
    assert "metadata" not in task and "setup" not in task
    alias = {**STATE_TASK, "verifier": {**STATE_TASK["verifier"], "setup_state": {"a": "1"}}}
    del alias["setup"]
    assert parse_tasks(json.dumps([alias]))[0]["verifier"]["setup_state"] == {"a": "1"}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"setup": {"state": {"../x": "1"}}}, "tasks[0].setup.state['../x']", "path must be"),
        ({"setup": {"files": {}}}, "tasks[0].setup.files", "is not a field of setup"),
        ({"setup": "x"}, "tasks[0].setup", "must be an object"),
        (
            {"verifier": {**STATE_TASK["verifier"], "setup_state": {"a": "1"}}},
            "tasks[0].setup.state",
            "both give the setup files",
        ),
        ({"verifier": {"kind": "judge"}}, "tasks[0].setup.state", "this task's verifier is judge"),
    ],
)
def test_a_bad_setup_is_refused_naming_it(change, field, words):
    with pytest.raises(Invalid) as caught:
        parse_tasks(json.dumps([{**STATE_TASK, **change}]))
    assert caught.value.field == field and words in caught.value.message


def test_the_runner_never_keeps_setup_as_metadata_either():
    runner = _runner()
    judged = {"id": "j", "prompt": "P", "setup": {"state": {"a": "1"}}}
    with pytest.raises(runner.TasksError, match="setup.state places files for a state_diff"):
        runner.parse_text(json.dumps([judged]))
    (task,) = runner.parse_text(json.dumps([STATE_TASK]))
    assert "setup" not in task["metadata"]


def test_the_harbor_export_places_setup_state_files_in_the_tasks_state():
    from harnesses.harbor_export import export_files

    files = {f.path: f.content for f in export_files(parse_tasks(json.dumps([STATE_TASK])))}
    assert files["todo/environment/state/notes/todo.txt"] == b"[ ] milk\n"
