"""POST /api/v1/traces: sessions, what is read from the spans, and the run a span belongs to."""

import pytest

from runs.models import Run
from tests.traces.helpers import (
    body_of,
    fixture_bytes,
    fixture_doc,
    llm_attributes,
    new_trace_id,
    post_traces,
    span,
)
from traces.models import Session, Span

pytestmark = pytest.mark.django_db


# --- sessions --------------------------------------------------------------------------------


def test_the_session_is_the_association_property_then_session_id_then_conversation_id(owner):
    keys = {
        "a": {
            "traceloop.association.properties.session_id": "assoc",
            "session.id": "plain",
            "gen_ai.conversation.id": "conv",
        },
        "b": {"session.id": "plain", "gen_ai.conversation.id": "conv"},
        "c": {"gen_ai.conversation.id": "conv"},
    }

    post_traces(owner.key, body_of(*(span(name, attributes=a) for name, a in keys.items())))

    assert dict(Span.objects.values_list("name", "session__external_id")) == {
        "a": "assoc",
        "b": "plain",
        "c": "conv",
    }


def test_a_resource_session_id_applies_to_every_span_of_the_resource(owner):
    post_traces(owner.key, body_of(span("x"), span("y"), resource={"session.id": "from-resource"}))

    assert Session.objects.get(external_id="from-resource").span_count == 2


def test_a_span_without_a_session_id_takes_its_traces_session_in_the_same_batch(owner):
    document = fixture_doc("sdk_raw_http_long_history.json")
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert not any(a["key"].endswith("session_id") for a in chat["attributes"])
    post = span(
        "POST",
        trace_id=chat["traceId"],
        parent=chat["spanId"],
        attributes={
            "traceloop.association.properties.session_id": "long-run",
            "http.method": "POST",
        },
    )
    document["resourceSpans"][0]["scopeSpans"][0]["spans"].append(post)

    assert post_traces(owner.key, document).status_code == 200

    session = Session.objects.get(external_id="long-run")
    assert set(Span.objects.values_list("session", flat=True)) == {session.pk}
    call = Span.objects.get(span_id=chat["spanId"])
    assert call.is_llm and len(call.input_messages) == 61
    assert session.llm_call_count == 1


def test_a_span_without_a_session_id_takes_the_session_its_trace_already_has(owner):
    document = fixture_doc("sdk_raw_http_long_history.json")
    chat = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    post = span(
        "POST",
        trace_id=chat["traceId"],
        parent=chat["spanId"],
        attributes={"traceloop.association.properties.session_id": "long-run"},
    )
    post_traces(owner.key, body_of(post))  # the child ended first: it came in an earlier batch

    post_traces(owner.key, document)

    assert Span.objects.get(span_id=chat["spanId"]).session.external_id == "long-run"
    assert Session.objects.count() == 1


def test_spans_with_no_session_id_anywhere_are_a_session_of_their_trace(owner):
    trace_id = new_trace_id()
    post_traces(owner.key, body_of(span("a", trace_id=trace_id), span("b", trace_id=trace_id)))

    session = Session.objects.get()
    assert session.external_id == f"trace:{trace_id}" and session.span_count == 2


def test_a_session_spanning_many_traces_is_one_session(owner):
    """Every SDK task() is a new trace; the session id joins them (sdk_batch has three)."""
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    assert Span.objects.values("trace_id").distinct().count() == 3
    assert Session.objects.count() == 1


def test_a_sessions_model_is_its_latest_llm_calls_whatever_order_the_batches_come_in(owner):
    def call(model: str, start: int) -> dict:
        return span("chat", attributes=llm_attributes("models", model=model), start=start)

    post_traces(owner.key, body_of(call("second", 2000), call("first", 1000)))
    assert Session.objects.get(external_id="models").model == "second"

    post_traces(owner.key, body_of(call("earliest", 0)))  # late, but older: the model stays
    post_traces(owner.key, body_of(span("tool", attributes={"session.id": "models"}, start=9000)))
    session = Session.objects.get(external_id="models")
    assert (session.model, session.span_count, session.llm_call_count) == ("second", 4, 3)

    post_traces(owner.key, body_of(call("third", 3000)))
    assert Session.objects.get(external_id="models").model == "third"


# --- what is read from the spans ----------------------------------------------------------------


def test_llm_calls_are_read_from_the_current_attribute_format(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    call = Span.objects.get(span_id="a8c856a54b5c6625")
    assert call.is_llm and call.model == "gpt-4o-mini-2024"
    assert call.input_messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
    assert call.output_messages == [{"role": "assistant", "content": "4"}]
    assert (call.input_tokens, call.output_tokens, call.total_tokens) == (20, 1, 21)
    assert call.duration_ms == pytest.approx(17.909, abs=0.01)


def test_llm_calls_are_read_from_the_older_attribute_format(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))

    raw = Span.objects.get(name="chat meta-llama/llama-3-8b")
    assert raw.is_llm and raw.scope_name == "belvedir-http"
    assert raw.input_messages == [{"role": "user", "content": "raw requests"}]
    assert raw.output_messages[0]["role"] == "assistant" and raw.output_messages[0]["content"]
    assert (raw.input_tokens, raw.output_tokens, raw.total_tokens) == (20, 1, 21)


def test_older_token_keys_and_importer_doubles_are_counted(owner):
    older = span(
        "ollama.chat",
        attributes={
            "session.id": "older",
            "gen_ai.system": "Ollama",
            "llm.request.type": "chat",
            "gen_ai.request.model": "llama3",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
            "gen_ai.usage.prompt_tokens": 7,
            "gen_ai.usage.completion_tokens": 2,
            "llm.usage.total_tokens": 10,
        },
    )
    post_traces(owner.key, body_of(older))
    post_traces(owner.key, fixture_bytes("sdk_import_batch.json"))

    call = Span.objects.get(name="ollama.chat")
    assert (call.model, call.input_tokens, call.output_tokens, call.total_tokens) == (
        "llama3",
        7,
        2,
        10,
    )
    assert call.output_messages == [{"role": "assistant", "content": "hello"}]
    imported = Span.objects.get(name="ChatOpenAI")
    assert (imported.model, imported.input_tokens, imported.output_tokens) == ("gpt-4o", 12, 1)
    assert Session.objects.get(external_id="conv-42").llm_call_count == 2


def test_workflow_task_and_tool_spans_keep_their_span_kind(owner):
    post_traces(owner.key, fixture_bytes("sdk_batch.json"))
    post_traces(owner.key, fixture_bytes("sdk_import_batch.json"))
    post_traces(
        owner.key,
        body_of(span("fetch.task", attributes={"session.id": "k", "traceloop.span.kind": "task"})),
    )

    kinds = dict(Span.objects.exclude(span_kind="").values_list("name", "span_kind"))
    assert kinds == {
        "answer the question.workflow": "workflow",
        "raw http.workflow": "workflow",
        "failing task.workflow": "workflow",
        "calculator": "tool",
        "fetch.task": "task",
    }
    assert Span.objects.get(name="fetch.task").entity_name == "fetch"
    assert (
        Span.objects.get(name="answer the question.workflow").entity_name == "answer the question"
    )
    assert Span.objects.get(name="openai.chat", span_id="a8c856a54b5c6625").span_kind == ""


def test_absurd_token_counts_are_not_stored_as_counts_and_do_not_fail_the_batch(owner):
    post_traces(
        owner.key,
        body_of(
            span(
                "odd",
                attributes=llm_attributes("odd")
                | {"gen_ai.usage.input_tokens": 2**62, "gen_ai.usage.total_tokens": 2**40},
            )
        ),
    )

    call = Span.objects.get(name="odd")
    assert call.is_llm and call.input_tokens is None and call.output_tokens == 3


# --- runs --------------------------------------------------------------------------------


def test_spans_sent_with_a_run_key_belong_to_the_run(running_run):
    post_traces(running_run.key, fixture_bytes("sdk_batch.json"))  # session id "run_capture_1"

    session = Session.objects.get(external_id="run_capture_1")
    assert session.run == running_run
    assert set(Span.objects.values_list("run", flat=True)) == {running_run.pk}


def test_a_harness_session_named_by_its_run_id_belongs_to_the_run(running_run):
    post_traces(running_run.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    session = Session.objects.get(external_id=running_run.pk)
    assert session.run == running_run and session.project == running_run.project
    assert Span.objects.get().run == running_run


def test_a_project_key_session_named_by_a_run_id_of_the_project_belongs_to_that_run(
    owner, running_run
):
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    assert Session.objects.get(external_id=running_run.pk).run == running_run
    assert Span.objects.get().run == running_run


def test_a_session_named_by_another_projects_run_id_belongs_to_no_run(outsider, running_run):
    post_traces(outsider.key, body_of(span("call", attributes=llm_attributes(running_run.pk))))

    session = Session.objects.get(external_id=running_run.pk)
    assert session.project == outsider.project and session.run is None
    assert Span.objects.get().run is None


def test_a_run_key_cannot_write_into_another_runs_session(owner, running_run, harness):
    other = Run.objects.create(
        project=owner.project, harness=harness, harness_name="h", status="running"
    )
    # Named after the other run (not yet seen), and an existing session of the other run.
    response = post_traces(
        running_run.key, body_of(span("call", attributes=llm_attributes(other.pk)))
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "a run key writes only into its own run's sessions" in partial["errorMessage"]
    assert not Session.objects.filter(external_id=other.pk).exists()
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes("shared"))))
    Session.objects.filter(external_id="shared").update(run=other)
    before = Session.objects.get(external_id="shared")
    response = post_traces(
        running_run.key,
        body_of(
            span("a", span_id="1" * 16, attributes=llm_attributes("shared")),
            span("b", span_id="2" * 16, attributes=llm_attributes(running_run.pk)),
        ),
    )
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    after = Session.objects.get(external_id="shared")
    assert after.run == other and after.span_count == before.span_count == 1
    assert after.last_received_at == before.last_received_at
    assert Span.objects.get(name="b").run == running_run


def test_a_run_key_cannot_claim_a_project_keys_session(owner, running_run):
    post_traces(owner.key, body_of(span("call", attributes=llm_attributes("project-session"))))
    response = post_traces(
        running_run.key,
        body_of(span("x", span_id="3" * 16, attributes=llm_attributes("project-session"))),
    )
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert Session.objects.get(external_id="project-session").run is None
    assert not Span.objects.filter(name="x").exists()
