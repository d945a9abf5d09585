"""Each limit is defined once, and the messages that name it take it from there."""

import pytest

from belvedir.errors import Invalid
from belvedir.text import size_text
from harnesses import policy, tasks_format
from traces import ingest_views, schema


@pytest.mark.parametrize(
    "size, text",
    [
        (500, "500 B"),
        (64 * 1024, "64 KB"),
        (256 * 1024, "256 KB"),
        (2**20, "1 MB"),
        (2**30, "1 GB"),
    ],
)
def test_a_limit_is_spelled_in_kb_mb_gb_as_the_messages_always_were(size, text):
    assert size_text(size, iec=False) == text


def test_sizes_people_read_keep_their_binary_units():
    assert (size_text(256 * 1024), size_text(3 * 2**20 + 200_000)) == ("256 KiB", "3.2 MiB")


def test_the_tasks_limit_and_its_messages_follow_one_constant(monkeypatch):
    assert policy.TASKS_MAX_BYTES == tasks_format.MAX_BYTES
    monkeypatch.setattr(tasks_format, "MAX_BYTES", 2048)

    with pytest.raises(Invalid) as field:
        policy.validate_tasks("a" * 2049)
    with pytest.raises(Invalid) as upload:
        tasks_format.size_check(4096, "tasks_file", name="tasks.jsonl")

    assert (field.value.field, field.value.message) == (
        "tasks",
        "tasks is 2,049 bytes; the limit is 2 KB.",
    )
    assert (upload.value.field, upload.value.message) == (
        "tasks_file",
        "tasks.jsonl is 4,096 bytes; the limit is 2 KB.",
    )


def test_the_outcomes_body_limit_is_the_one_its_answer_and_the_schema_name():
    assert ingest_views.OUTCOMES_TOO_LARGE == "The body is over 64 KB."
    assert schema.OUTCOMES_TOO_LARGE is ingest_views.OUTCOMES_TOO_LARGE
