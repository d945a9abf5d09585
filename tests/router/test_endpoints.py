"""OpenAI's completions, embeddings and responses through the router, as chat completions go:
forwarded to the operator's upstream with its key and only the endpoint's own fields, the
worst case reserved and the call settled against the run's cap, one LLM span each in the run's
session with its model, prompt, tokens and cost; streamed where the API streams."""

import json

import httpx
import pytest

from billing.pricing import Price, cost_micros
from router.endpoints import ENDPOINTS
from tests.router.fake_upstream import PROMPT_TOKENS
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
COST = cost_micros(PRICE, input_tokens=PROMPT_TOKENS, output_tokens=5)
REPLY = "w0 w1 w2 w3 w4"


def _post(router_url: str, run, path: str, body: dict, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {run.plain_key}"}
    return httpx.post(f"{router_url}/{path}", json=body, headers=headers, timeout=30, **kwargs)


def _events(answer: httpx.Response) -> list[dict]:
    return [
        json.loads(line[5:])
        for line in answer.text.splitlines()
        if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]


def _span(run, spans: int = 1) -> Span:
    run = settled(run, spans=spans)
    return Span.objects.filter(run=run).latest("start_time")


def test_a_completion_is_forwarded_with_its_limit_metered_and_traced(
    covered_run, router_url, upstream
):
    body = {"model": MODEL, "prompt": "2 + 2 =", "max_tokens": 20, "logprobs": 1}

    answer = _post(router_url, covered_run, "completions", body)

    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"] == REPLY
    headers, forwarded = upstream.seen[0], upstream.requests[0]
    assert headers["path"] == "/v1/completions"
    assert headers["authorization"] == "Bearer sk-upstream-operator"
    assert (forwarded["max_tokens"], forwarded["logprobs"]) == (20, 1)
    span = _span(covered_run)
    run = span.run
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (COST, 0)
    assert span.attributes["gen_ai.operation.name"] == "text_completion"
    assert (span.model, span.input_tokens, span.output_tokens) == (MODEL, PROMPT_TOKENS, 5)
    assert span.input_messages[0]["content"] == "2 + 2 ="
    assert span.output_messages[0]["content"] == REPLY
    assert span.attributes["belvedir.router.cost_micros"] == COST
    assert span.duration_ms > 0


def test_a_streamed_completion_asks_for_its_usage_and_is_settled_from_it(
    covered_run, router_url, upstream
):
    body = {"model": MODEL, "prompt": ["a b"], "stream": True, "max_tokens": 9}

    answer = _post(router_url, covered_run, "completions", body)

    assert answer.status_code == 200
    assert "".join(c["choices"][0]["text"] for c in _events(answer) if c["choices"]) == REPLY
    assert upstream.requests[0]["stream_options"] == {"include_usage": True}
    span = _span(covered_run)
    assert span.attributes["belvedir.router.streamed"] is True
    assert (span.output_tokens, span.output_messages[0]["content"]) == (5, REPLY)
    assert span.run.covered_spent_micros == COST


def test_best_of_is_refused_naming_it_for_it_bills_that_many_completions(
    covered_run, router_url, upstream
):
    body = {"model": MODEL, "prompt": "x", "best_of": 20}

    answer = _post(router_url, covered_run, "completions", body)

    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "best_of"
    assert upstream.requests == []


def test_embeddings_are_charged_their_input_tokens_only(covered_run, router_url, upstream):
    body = {"model": MODEL, "input": ["one", "two"], "dimensions": 3, "stream": True}

    answer = _post(router_url, covered_run, "embeddings", body)

    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]) == 2
    (forwarded,) = upstream.requests
    assert "max_tokens" not in forwarded and "stream" not in forwarded  # nothing to limit
    assert forwarded["dimensions"] == 3
    span = _span(covered_run)
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert (span.input_tokens, span.output_tokens) == (PROMPT_TOKENS, None)
    input_only = cost_micros(PRICE, input_tokens=PROMPT_TOKENS, output_tokens=0)
    assert span.run.covered_spent_micros == input_only


def test_the_worst_case_of_embeddings_reserves_no_output():
    endpoint = ENDPOINTS["embeddings"]
    body = {"model": MODEL, "input": "x" * 300}

    assert endpoint.output_limit(PRICE, body) == 0
    assert endpoint.worst_case(PRICE, body) == cost_micros(
        PRICE, input_tokens=endpoint.prompt_tokens(body), output_tokens=0
    )
    assert endpoint.prompt_tokens(body) >= 100  # the input is counted


def test_a_response_is_limited_by_max_output_tokens_metered_and_traced(
    covered_run, router_url, upstream
):
    body = {"model": MODEL, "input": "hello", "instructions": "Be brief.", "max_output_tokens": 7}

    answer = _post(router_url, covered_run, "responses", body)

    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][0]["content"][0]["text"] == REPLY
    forwarded = upstream.requests[0]
    assert upstream.seen[0]["path"] == "/v1/responses"
    assert forwarded["max_output_tokens"] == 7
    span = _span(covered_run)
    assert span.input_messages[0] == {"role": "system", "content": "Be brief."}
    assert (span.input_tokens, span.output_tokens) == (PROMPT_TOKENS, 5)
    assert span.run.covered_spent_micros == COST


def test_a_streamed_response_passes_its_events_through_and_is_settled_from_completed(
    covered_run, router_url, upstream
):
    body = {"model": MODEL, "input": [{"role": "user", "content": "hi"}], "stream": True}

    answer = _post(router_url, covered_run, "responses", body)

    assert answer.status_code == 200
    assert "event: response.completed" in answer.text
    deltas = [e["delta"] for e in _events(answer) if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == REPLY
    assert upstream.requests[0]["max_output_tokens"] == MAX_OUTPUT
    span = _span(covered_run)
    assert span.attributes["belvedir.router.streamed"] is True
    assert (span.output_tokens, span.output_messages[0]["content"]) == (5, REPLY)
    assert span.run.covered_spent_micros == COST


@pytest.mark.parametrize(
    "field, value",
    [
        ("previous_response_id", "resp_earlier"),
        ("conversation", "conv_1"),
        ("background", True),
        ("tools", [{"type": "web_search"}]),
        ("tools", [{"type": "function", "name": "f"}, {"type": "code_interpreter"}]),
    ],
)
def test_a_response_with_context_or_billed_work_the_reservation_cannot_see_is_refused(
    covered_run, router_url, upstream, field, value
):
    answer = _post(
        router_url, covered_run, "responses", {"model": MODEL, "input": "x", field: value}
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == field
    assert upstream.requests == []
    assert settled(covered_run, spans=1).covered_spent_micros == 0


def test_a_body_without_the_endpoints_prompt_is_refused_naming_it(
    covered_run, router_url, upstream
):
    answer = _post(router_url, covered_run, "embeddings", {"model": MODEL, "messages": []})

    assert answer.status_code == 400
    assert "input" in answer.json()["error"]["message"]
    assert upstream.requests == []


def test_past_the_cap_an_endpoint_call_is_refused_before_it_is_forwarded(
    owner, harness, covered_model, router_url, upstream
):
    from tests.router.helpers import make_run

    run = make_run(owner.project, harness, cap_micros=10)

    answer = _post(router_url, run, "responses", {"model": MODEL, "input": "x" * 100})

    assert answer.status_code == 402
    assert answer.json()["error"]["code"] == "spend_cap_reached"
    assert upstream.requests == []


PDF_BY_URL = {"type": "document", "source": {"type": "url", "url": "https://example.org/a.pdf"}}


@pytest.mark.parametrize(
    "path, body, param",
    [
        # A list of prompts: one completion (n of them) per prompt upstream.
        ("completions", {"prompt": ["x"] * 2000, "max_tokens": 16, "n": 8}, "prompt"),
        ("completions", {"prompt": [[1, 2], [3, 4]]}, "prompt"),
        # Files the provider reads itself: a PDF of hundreds of pages for a few tokens.
        (
            "chat/completions",
            {
                "messages": [
                    {"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}
                ]
            },
            "messages",
        ),
        (
            "responses",
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input",
        ),
        ("responses", {"input": [{"type": "item_reference", "id": "msg_1"}]}, "input"),
        (
            "messages",
            {"max_tokens": 16, "messages": [{"role": "user", "content": [PDF_BY_URL]}]},
            "messages",
        ),
        (  # nested in a tool result
            "messages",
            {
                "max_tokens": 16,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t", "content": [PDF_BY_URL]}
                        ],
                    }
                ],
            },
            "messages",
        ),
    ],
    ids=[
        "prompts",
        "token-prompts",
        "chat-file",
        "input-file",
        "item-reference",
        "pdf-url",
        "nested",
    ],
)
def test_covered_input_the_reservation_cannot_measure_is_refused_naming_it(
    covered_run, router_url, upstream, path, body, param
):
    answer = _post(router_url, covered_run, path, {"model": MODEL, **body})

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, "unmeasured_input")
    assert upstream.requests == []
    assert settled(covered_run, spans=1).covered_spent_micros == 0


@pytest.mark.parametrize(
    "prompt", ["one text", ["one text in a list"], [1, 2, 3], [[1, 2, 3]]], ids=repr
)
def test_one_prompt_in_any_of_its_forms_is_forwarded(covered_run, router_url, upstream, prompt):
    answer = _post(router_url, covered_run, "completions", {"model": MODEL, "prompt": prompt})

    assert answer.status_code == 200, answer.text
    assert upstream.requests[-1]["prompt"] == prompt


def test_a_completions_suffix_is_counted_as_prompt():
    completions = ENDPOINTS["completions"]
    plain = completions.prompt_tokens({"prompt": "x"})
    assert completions.prompt_tokens({"prompt": "x", "suffix": "word " * 400}) > plain + 300
