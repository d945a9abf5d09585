"""A run key at ingest: its run's secrets are redacted from its spans, and it speaks only for its
own run's sessions."""

from belvedir import crypto
from belvedir.models import ApiKey
from belvedir.services import api_key_create
from harnesses import env_secrets
from runs.models import Run
from tests.traces.helpers import body_of, llm_attributes, post_outcome, post_traces, span
from traces.models import Span

HF = "hf_secret_token_5c1e9b0d7a"
MODEL_KEY = "sk-model-key-2a9f7e1c33"


def _run_with_secrets(owner, harness) -> tuple[Run, str]:
    run = Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        status="running",
        model_api_key_encrypted=crypto.encrypt(MODEL_KEY),
        harness_env_secrets_encrypted=env_secrets.secrets_encrypt({"HF_TOKEN": HF}),
    )
    run.ingest_key, key = api_key_create(
        project=owner.project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.run_key_encrypted = crypto.encrypt(key)
    run.save(update_fields=["ingest_key", "run_key_encrypted"])
    return run, key


def test_a_run_keys_spans_are_stored_with_the_runs_secrets_redacted(owner, harness):
    run, key = _run_with_secrets(owner, harness)
    attributes = llm_attributes(run.pk, **{"http.header": f"Bearer {MODEL_KEY}", HF: "as a key"})
    sent = span(f"call with {HF}", attributes=attributes)
    sent["events"] = [
        {
            "name": "log",
            "timeUnixNano": sent["startTimeUnixNano"],
            "attributes": [{"key": "line", "value": {"stringValue": f"token={HF} key={key}"}}],
        }
    ]
    sent["status"] = {"code": 2, "message": f"auth failed for {MODEL_KEY}"}
    response = post_traces(key, body_of(sent, resource={"env.hf": HF}))
    assert response.status_code == 200, response.content

    stored = Span.objects.get()
    text = " ".join(
        str(v)
        for v in (stored.name, stored.status_message, stored.attributes, stored.events)
        + (stored.resource,)
    )
    for secret in (HF, MODEL_KEY, key):
        assert secret not in text, f"{secret} stored in a span"
    assert stored.name == "call with [redacted]"
    assert stored.attributes["http.header"] == "Bearer [redacted]"
    assert stored.attributes["[redacted]"] == "as a key"
    assert stored.resource["env.hf"] == "[redacted]"
    assert stored.run == run


def test_a_project_keys_spans_are_stored_as_sent(owner, harness):
    run, _ = _run_with_secrets(owner, harness)
    post_traces(owner.key, body_of(span("plain", attributes=llm_attributes(run.pk, note="hi"))))
    assert Span.objects.get().attributes["note"] == "hi"


def test_a_run_key_cannot_set_the_outcome_of_a_project_session(owner, harness):

    _, key = _run_with_secrets(owner, harness)
    post_traces(owner.key, body_of(span("x", attributes=llm_attributes("project-session"))))
    response = post_outcome(key, {"session_id": "project-session", "outcome": "success"})
    assert response.status_code == 404
