"""The Runner reads every shape of tasks file in docs/tasks-format.md and refuses bad ones
naming the task and the field (host-side, no sandbox)."""

import json

import pytest

from tests.drivers.helpers import TASKS_TEXT  # also puts the drivers on sys.path

from belvedir_runner.tasks import TasksError, parse_text  # isort: skip


def test_a_json_list_of_objects_and_strings():
    tasks = parse_text(json.dumps([{"id": "a", "prompt": "P", "answer": "A"}, "Just ask"]))
    assert [t["id"] for t in tasks] == ["a", "task-2"]
    assert tasks[0]["verifier"] == {"kind": "judge"} and tasks[0]["answer"] == "A"
    assert tasks[1]["prompt"] == "Just ask" and tasks[1]["answer"] is None


def test_jsonl_and_plain_text_lines_mix_and_blank_lines_are_skipped():
    text = TASKS_TEXT.rsplit("\n", 1)[0] + "\n\nWrite a haiku about rain.\n"
    tasks = parse_text(text.replace("\n", "\n\n"))
    assert [t["id"] for t in tasks] == ["capital", "refund", "task-3"]
    assert tasks[1]["verifier"]["criteria"] == ["Cites 30 days", "Offers credit"]
    assert tasks[1]["metadata"] == {"topic": "billing"}
    assert tasks[2] == {
        "id": "task-3",
        "prompt": "Write a haiku about rain.",
        "answer": None,
        "verifier": {"kind": "judge"},
        "metadata": {},
    }


def test_one_task_object_over_several_lines_and_numbers_as_ids_and_answers():
    (task,) = parse_text('{\n  "id": 7,\n  "prompt": "2+2?",\n  "answer": 4\n}')
    assert (task["id"], task["answer"]) == ("7", "4")


def test_an_environment_object_is_read_for_its_tasks():
    text = json.dumps({"name": "support", "description": "d", "tasks": [{"prompt": "Hi?"}]})
    assert [t["prompt"] for t in parse_text(text)] == ["Hi?"]


@pytest.mark.parametrize(
    "text,message",
    [
        ('[{"prompt": "a",}]', "tasks is not valid JSON"),
        ('{"prompt": "a"}\n{"prompt": ', "tasks: line 2 is not valid JSON"),
        ("[1]", "task 1: must be an object or a string"),
        ('[{"id": "x"}]', "task x: prompt is required"),
        ('[{"id": "a b", "prompt": "p"}]', "task 1: id 'a b' may hold only"),
        ('[{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}]', "task 2: id 'a' is used"),
        ('[{"id": "x", "prompt": "p", "answer": [4]}]', "task x: answer must be a string"),
        (
            '[{"id": "x", "prompt": "p", "verifier": {"kind": "regex"}}]',
            "task x: verifier.kind 'regex' is not one of judge, rubric, code, state_diff",
        ),
        (
            '[{"id": "x", "prompt": "p", "verifier": {"kind": "rubric", "criteria": []}}]',
            "task x: verifier.criteria must be a non-empty list",
        ),
        (
            '[{"id": "x", "prompt": "p", "verifier": {"kind": "code", "source": "x = 1"}}]',
            "task x: verifier.source must define verify(answer, state)",
        ),
        (
            '[{"id": "x", "prompt": "p", "verifier": {"kind": "state_diff", "golden": {}}}]',
            "task x: verifier.golden must be a non-empty object",
        ),
        (
            '[{"id": "x", "prompt": "p", "verifier": {"kind": "state_diff",'
            ' "golden": {"../etc/passwd": "x"}}}]',
            'task x: verifier.golden path "../etc/passwd" must be relative',
        ),
        ("\n\n", "tasks: the file holds no task"),
    ],
)
def test_bad_tasks_are_refused_naming_the_task_and_field(text, message):
    with pytest.raises(TasksError) as error:
        parse_text(text)
    assert message in str(error.value)


def test_a_file_over_512_kb_is_refused():
    with pytest.raises(TasksError, match="the limit is 512 KB"):
        parse_text("x" * (512 * 1024 + 1))


def test_code_and_state_diff_tasks_parse_for_harbor():
    tasks = parse_text(
        json.dumps(
            [
                {
                    "id": "sum",
                    "prompt": "2+2?",
                    "verifier": {
                        "kind": "code",
                        "source": "def verify(answer, state):\n  return 1",
                    },
                },
                {
                    "id": "todo",
                    "prompt": "Fix the file",
                    "verifier": {
                        "kind": "state_diff",
                        "setup_state": {"notes/todo.txt": "a"},
                        "golden": {"notes/todo.txt": "b"},
                    },
                },
            ]
        )
    )
    assert [t["verifier"]["kind"] for t in tasks] == ["code", "state_diff"]
