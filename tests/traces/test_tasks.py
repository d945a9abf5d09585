"""Tasks and task groups: formed by the scheduled job once a session has been quiet."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db.models import F
from django_q.models import Schedule

from tests.traces.helpers import (
    body_of,
    fixture_bytes,
    llm_attributes,
    new_span_id,
    new_trace_id,
    post_outcome,
    post_traces,
    span,
)
from traces.jobs import form_tasks
from traces.models import Session, Task, TaskGroup
from traces.services.task_forming import normalize_task_name, quiet_sessions_form, tasks_form

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quiet_seconds(settings):
    settings.BELVEDIR_TASKS_QUIET_SECONDS = 30
    return settings


def let_time_pass(seconds: float) -> None:
    """Every session's clock moves back: as if `seconds` passed since its spans and tasks."""
    delta = timedelta(seconds=seconds)
    Session.objects.update(last_received_at=F("last_received_at") - delta)
    Session.objects.exclude(tasks_formed_at=None).update(
        tasks_formed_at=F("tasks_formed_at") - delta
    )


def workflow(key: str, session_id: str, name: str, *, calls: int = 1, fail: bool = False) -> None:
    """One SDK task(): a workflow span and `calls` OpenAI calls under it, in its own trace."""
    trace_id, root = new_trace_id(), new_span_id()
    spans = [
        span(
            f"{name}.workflow",
            trace_id=trace_id,
            span_id=root,
            duration_ms=1000,
            status=2 if fail else 0,
            attributes={
                "traceloop.association.properties.session_id": session_id,
                "traceloop.span.kind": "workflow",
                "traceloop.entity.name": name,
            },
        )
    ]
    spans += [
        span(
            "openai.chat",
            trace_id=trace_id,
            parent=root,
            start=10 * (i + 1),
            attributes=llm_attributes(session_id),
        )
        for i in range(calls)
    ]
    assert post_traces(key, body_of(*spans)).status_code == 200


def tasks_of(external_id: str) -> list[Task]:
    return list(Task.objects.filter(session__external_id=external_id).order_by("name"))


# --- when -----------------------------------------------------------------------------------


def test_tasks_form_only_once_the_session_has_been_quiet_long_enough(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert form_tasks() == 0
    let_time_pass(20)
    assert form_tasks() == 0 and not Task.objects.exists()

    let_time_pass(11)
    assert form_tasks() == 1
    assert len(tasks_of("run_capture_1")) == 3
    assert Session.objects.get().tasks_formed_at is not None


def test_the_quiet_period_is_a_setting(owner, settings):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    settings.BELVEDIR_TASKS_QUIET_SECONDS = 300
    let_time_pass(200)

    assert form_tasks() == 0
    let_time_pass(101)
    assert form_tasks() == 1


def test_a_formed_session_is_not_formed_again_until_new_spans_come(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    let_time_pass(31)
    form_tasks()
    first = {t.pk for t in Task.objects.all()}

    let_time_pass(120)
    assert form_tasks() == 0
    assert {t.pk for t in Task.objects.all()} == first


def test_the_schedule_runs_the_former_every_minute(db):
    call_command("setup_schedules", stdout=open("/dev/null", "w"))

    schedule = Schedule.objects.get(func="traces.jobs.form_tasks")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == (Schedule.MINUTES, 1, -1)


def test_every_scheduled_job_names_a_function_that_exists(db):
    from django.utils.module_loading import import_string

    call_command("setup_schedules", stdout=open("/dev/null", "w"))

    funcs = [s.func for s in Schedule.objects.all()]
    assert sorted(funcs) == ["runs.jobs.reap", "traces.jobs.form_tasks"]
    assert all(callable(import_string(func)) for func in funcs)


# --- what ------------------------------------------------------------------------------------


def test_each_workflow_span_is_a_task_with_its_calls_tokens_and_status(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    let_time_pass(31)
    form_tasks()

    answer, failing, raw = tasks_of("run_capture_1")
    assert [t.name for t in (answer, failing, raw)] == [
        "answer the question",
        "failing task",
        "raw http",
    ]
    assert {t.kind for t in (answer, failing, raw)} == {"workflow"}
    assert (answer.llm_call_count, answer.total_tokens, answer.status) == (2, 34, "ok")
    assert (raw.llm_call_count, raw.total_tokens) == (2, 34)
    assert (failing.llm_call_count, failing.status) == (0, "error")
    assert answer.span.name == "answer the question.workflow"
    assert answer.started_at <= answer.ended_at
    assert answer.project == owner.project


def test_a_task_span_is_a_task_too(owner):
    trace_id, root = new_trace_id(), new_span_id()
    post_traces(
        owner.key,
        body_of(
            span(
                "fetch page.task",
                trace_id=trace_id,
                span_id=root,
                attributes={"session.id": "t", "traceloop.span.kind": "task"},
            ),
            span("openai.chat", trace_id=trace_id, parent=root, attributes=llm_attributes("t")),
            span(
                "lookup.tool",
                trace_id=trace_id,
                parent=root,
                attributes={"session.id": "t", "traceloop.span.kind": "tool"},
            ),
        ),
    )
    let_time_pass(31)
    form_tasks()

    (task,) = tasks_of("t")
    assert (task.name, task.kind, task.llm_call_count, task.total_tokens) == (
        "fetch page",
        "task",
        1,
        15,
    )


def test_a_session_without_workflow_or_task_spans_is_one_task(owner):
    post_traces(owner.key, fixture_bytes("sdk_import_batch.json"))  # plain spans, a tool span
    let_time_pass(31)
    assert form_tasks() == 2

    (conversation,) = tasks_of("conv-42")
    assert conversation.kind == "session" and conversation.span is None
    assert conversation.name == "chat completion"
    assert conversation.llm_call_count == 2
    (thread,) = tasks_of("ls-thread-1")
    assert (thread.kind, thread.name, thread.llm_call_count, thread.total_tokens) == (
        "session",
        "ChatOpenAI",
        1,
        13,
    )
    assert thread.status == "error"  # its calculator tool span failed


def test_new_spans_after_forming_re_form_the_session_without_duplicates(owner):
    workflow(owner.key, "s1", "plan", calls=2)
    let_time_pass(31)
    form_tasks()
    assert [(t.name, t.llm_call_count) for t in tasks_of("s1")] == [("plan", 2)]

    workflow(owner.key, "s1", "act", calls=1)
    assert form_tasks() == 0  # not quiet yet
    let_time_pass(31)
    assert form_tasks() == 1

    assert [(t.name, t.llm_call_count) for t in tasks_of("s1")] == [("act", 1), ("plan", 2)]
    assert Task.objects.count() == 2
    assert sorted(TaskGroup.objects.values_list("name", "task_count")) == [("act", 1), ("plan", 1)]


def test_a_retried_batch_re_forms_to_the_same_tasks(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    let_time_pass(31)
    form_tasks()
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    let_time_pass(31)
    form_tasks()

    assert Task.objects.count() == 3
    assert set(TaskGroup.objects.values_list("task_count", flat=True)) == {1}


def test_forming_directly_and_with_no_quiet_time_works_for_any_session(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    session = Session.objects.get()

    assert len(tasks_form(session=session)) == 3
    assert len(tasks_form(session=session)) == 3
    assert Task.objects.count() == 3
    assert quiet_sessions_form(quiet_seconds=0) == 0  # already formed since its last span


# --- groups ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ("Solve issue 123", "solve-issue-456"),
        ("fix_bug_7", "Fix bug 8"),
        (
            "summarize doc 3f2a9c1e-55aa-4bb1-9c3d-1234567890ab",
            "Summarize doc 00000000-1111-2222-3333-444444444444",
        ),
        ("answer.question:12", "answer question 99"),
    ],
)
def test_names_that_differ_in_ids_case_and_separators_normalize_alike(a, b):
    assert normalize_task_name(a) == normalize_task_name(b)


def test_different_work_normalizes_apart():
    assert normalize_task_name("solve issue 1") != normalize_task_name("review issue 1")


def test_a_group_gathers_tasks_of_the_same_normalized_name_across_sessions(owner):
    workflow(owner.key, "session-a", "Solve issue 123")
    workflow(owner.key, "session-b", "solve-issue-456", calls=2)
    workflow(owner.key, "session-b", "write report")
    let_time_pass(31)
    assert form_tasks() == 2

    group = TaskGroup.objects.get(normalized_name="solve issue #")
    assert group.task_count == 2 and group.project == owner.project
    assert {t.session.external_id for t in group.tasks.all()} == {"session-a", "session-b"}
    assert TaskGroup.objects.get(normalized_name="write report").task_count == 1
    assert TaskGroup.objects.count() == 2


def test_groups_count_success_and_fail_from_the_session_outcomes(owner):
    for session_id, name in [
        ("a", "Solve issue 1"),
        ("b", "solve issue 2"),
        ("c", "Solve-Issue-3"),
    ]:
        workflow(owner.key, session_id, name)
    # One outcome before the tasks form, one after, one never.
    post_outcome(owner.key, {"session_id": "a", "outcome": "success"})
    let_time_pass(31)
    form_tasks()
    group = TaskGroup.objects.get()
    assert (group.task_count, group.success_count, group.fail_count) == (3, 1, 0)

    post_outcome(owner.key, {"session_id": "b", "outcome": "fail"})
    group.refresh_from_db()
    assert (group.task_count, group.success_count, group.fail_count) == (3, 1, 1)

    post_outcome(owner.key, {"session_id": "a", "outcome": "fail"})  # a changed mind
    group.refresh_from_db()
    assert (group.success_count, group.fail_count) == (0, 2)


def test_re_forming_a_session_does_not_count_its_tasks_twice_in_a_group(owner):
    workflow(owner.key, "a", "Solve issue 1")
    workflow(owner.key, "b", "Solve issue 2")
    post_outcome(owner.key, {"session_id": "a", "outcome": "success"})
    let_time_pass(31)
    form_tasks()
    workflow(owner.key, "a", "unrelated")
    let_time_pass(31)
    form_tasks()

    group = TaskGroup.objects.get(normalized_name="solve issue #")
    assert (group.task_count, group.success_count) == (2, 1)


def test_groups_belong_to_one_project(owner, outsider):
    workflow(owner.key, "a", "Solve issue 1")
    workflow(outsider.key, "a", "Solve issue 2")
    let_time_pass(31)
    form_tasks()

    assert TaskGroup.objects.filter(normalized_name="solve issue #").count() == 2
    for tenant in (owner, outsider):
        group = TaskGroup.objects.get(project=tenant.project)
        assert group.task_count == 1
        assert {t.project for t in group.tasks.all()} == {tenant.project}


def test_a_group_left_without_tasks_after_re_forming_disappears(owner):
    post_traces(owner.key, body_of(span("chat once", attributes={"session.id": "s-lone"})))
    let_time_pass(31)
    form_tasks()
    assert list(TaskGroup.objects.values_list("name", flat=True)) == ["chat once"]

    workflow(owner.key, "s-lone", "plan")  # now the session has a workflow span: one task for it
    let_time_pass(31)
    form_tasks()
    assert list(TaskGroup.objects.values_list("name", "task_count")) == [("plan", 1)]
