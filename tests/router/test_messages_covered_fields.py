"""What a covered Messages call may carry (issue 25 item 1; review A1-A3): only work the
reservation bounds. Context editing of Claude Code's kinds (clearing tool uses or thinking)
is passed on; a compaction edit, which runs a sampling pass of its own, is refused, and so
is every tool but the caller's own (custom, or one the client executes: bash, the text
editor, the computer, memory). A pass the answer reports in `usage.iterations` is settled
too, and a structured output's schema is counted as prompt. An own-key call's fields go to
the user's provider as sent."""

import httpx
import pytest

from billing.pricing import Price, cost_micros
from router.endpoints import ENDPOINTS
from router.endpoints.anthropic import anthropic_usage
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, settled
from traces.models import Span

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
BODY = {
    "model": MODEL,
    "max_tokens": 50,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "2 + 2?"}]}],
}
COMPACTION = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
CUSTOM = {"name": "Write", "description": "Write a file.", "input_schema": {"type": "object"}}


def _post(router_url: str, key: str, body: dict, **headers) -> httpx.Response:
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01", **headers}
    return httpx.post(f"{router_url}/messages", json=body, headers=headers, timeout=30)


def _refused_naming(answer: httpx.Response, param: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, "unsupported_field")


@pytest.mark.parametrize(
    "edits",
    [
        [COMPACTION],
        [{"type": "clear_tool_uses_20250919"}, COMPACTION],
        [{"type": "future_edit_20270101"}],
        "not a list",
    ],
)
def test_a_covered_call_with_an_edit_not_clearing_tool_uses_or_thinking_is_refused(
    covered_run, router_url, upstream, edits
):
    body = {**BODY, "context_management": {"edits": edits}}

    answer = _post(
        router_url, covered_run.plain_key, body, **{"anthropic-beta": "compact-2026-01-12"}
    )

    _refused_naming(answer, "context_management")
    assert upstream.requests == []
    settled(covered_run, spans=1)


def test_clearing_tool_uses_and_thinking_reach_a_covered_model(covered_run, router_url, upstream):
    edits = [
        {"type": "clear_thinking_20251015", "keep": "all"},
        {"type": "clear_tool_uses_20250919"},
    ]
    body = {**BODY, "context_management": {"edits": edits}}

    answer = _post(router_url, covered_run.plain_key, body)

    assert answer.status_code == 200, answer.text
    assert upstream.requests[0]["context_management"] == {"edits": edits}
    settled(covered_run, spans=1)


def test_a_compaction_beta_is_not_passed_on_a_covered_call(covered_run, router_url, upstream):
    beta = "compact-2026-01-12, interleaved-thinking-2025-05-14"

    answer = _post(router_url, covered_run.plain_key, BODY, **{"anthropic-beta": beta})

    assert answer.status_code == 200, answer.text
    assert upstream.headers[0]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    settled(covered_run, spans=1)


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "advisor_20260301", "name": "advisor", "model": "claude-opus-4-6"},
        {"type": "future_server_tool_20270101", "name": "x"},
        {"type": "web_fetch_20250910", "name": "web_fetch"},
        {"type": "mcp_toolset", "mcp_server_name": "x"},
        {"type": ["custom"], "name": "x"},
    ],
)
def test_a_covered_call_with_a_tool_the_provider_runs_is_refused(
    covered_run, router_url, upstream, tool
):
    answer = _post(router_url, covered_run.plain_key, {**BODY, "tools": [CUSTOM, tool]})

    _refused_naming(answer, "tools")
    assert upstream.requests == []


def test_the_callers_own_tools_reach_a_covered_model(covered_run, router_url, upstream):
    tools = [
        CUSTOM,
        {**CUSTOM, "name": "Read", "type": "custom"},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024},
        {"type": "memory_20250818", "name": "memory"},
    ]

    answer = _post(router_url, covered_run.plain_key, {**BODY, "tools": tools})

    assert answer.status_code == 200, answer.text
    assert upstream.requests[0]["tools"] == tools
    settled(covered_run, spans=1)


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "web_search_preview"},
        {"type": "image_generation_2027"},
        {"type": "future_hosted_tool"},
    ],
)
def test_a_covered_response_with_a_hosted_tool_is_refused(covered_run, router_url, upstream, tool):
    function = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    body = {"model": MODEL, "input": "hi", "tools": [function, tool]}
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}

    answer = httpx.post(f"{router_url}/responses", json=body, headers=headers, timeout=30)

    _refused_naming(answer, "tools")
    assert upstream.requests == []


def test_a_covered_response_with_function_and_custom_tools_is_forwarded(
    covered_run, router_url, upstream
):
    tools = [
        {"type": "function", "name": "f", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch"},
    ]
    body = {"model": MODEL, "input": "hi", "tools": tools}
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}

    answer = httpx.post(f"{router_url}/responses", json=body, headers=headers, timeout=30)

    assert answer.status_code == 200, answer.text
    assert upstream.requests[0]["tools"] == tools
    settled(covered_run, spans=1)


ITERATIONS = [
    {"type": "compaction", "input_tokens": 50_000, "output_tokens": 2_000},
    {"type": "message", "input_tokens": 100, "output_tokens": 5},
]


def test_the_passes_an_answer_lists_in_its_iterations_are_all_counted():
    usage = anthropic_usage({"input_tokens": 100, "output_tokens": 5, "iterations": ITERATIONS})

    assert usage.input_tokens >= 50_100
    assert usage.output_tokens >= 2_005


def test_a_covered_answer_with_a_compaction_pass_is_settled_for_it_within_the_reservation(
    covered_run, router_url, upstream
):
    """The upstream reports a pass the call did not ask for (50k in, 2k out): the run is
    charged for every pass it reports, but never past what it reserved."""
    upstream.usage_of = lambda body: {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "iterations": ITERATIONS,
    }

    answer = _post(router_url, covered_run.plain_key, BODY)

    assert answer.status_code == 200, answer.text
    run = settled(covered_run, spans=1)
    span = Span.objects.get(run=run)
    reserved = ENDPOINTS["messages"].worst_case(PRICE, BODY)
    both_passes = cost_micros(PRICE, input_tokens=50_100, output_tokens=2_005)
    assert run.covered_spent_micros == min(both_passes, reserved)
    assert run.covered_spent_micros > cost_micros(PRICE, input_tokens=100, output_tokens=5)
    assert span.attributes["gen_ai.usage.input_tokens"] >= 50_100


def test_a_structured_outputs_schema_counts_as_prompt_like_a_system_prompt():
    endpoint = ENDPOINTS["messages"]
    text = "x" * 200_000
    schema = {"type": "object", "description": text}
    with_schema = {**BODY, "output_config": {"format": {"type": "json_schema", "schema": schema}}}
    with_system = {**BODY, "system": text}

    assert endpoint.worst_case(PRICE, with_schema) >= endpoint.worst_case(PRICE, with_system)
