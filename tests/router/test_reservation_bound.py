"""The reserved worst case is a bound on what a call can cost: it counts every choice (`n`),
Chinese text at a token a character and each image at a fixed allowance, and the limit it
reserved for is what the upstream is told (`max_tokens` and `max_completion_tokens`, reasoning
budgets under it). So an upstream that uses everything it is allowed still never takes fifty
concurrent calls past the run's cap; bodies up to the router's own limit pass."""

import base64
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from billing.pricing import (
    MAX_CHOICES,
    TOKENS_PER_IMAGE,
    Price,
    prompt_tokens_estimate,
    worst_case_micros,
)
from router.calls import forwarded_body
from router.http import MAX_BODY_BYTES
from router.services import Admission
from tests.router.helpers import INPUT_PRICE, MAX_OUTPUT, MODEL, OUTPUT_PRICE, make_run, settled
from traces.models import Span

PRICE = Price(INPUT_PRICE, OUTPUT_PRICE, MAX_OUTPUT)
CHINESE = "请用中文详细解释一下这个问题的答案" * 12  # 204 characters, ~1 token each


def _body(**extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": CHINESE}], **extra}


def test_the_worst_case_counts_every_choice_chinese_text_and_images():
    one = worst_case_micros(PRICE, _body(max_tokens=10))
    prompt = prompt_tokens_estimate(_body())
    assert prompt >= len(CHINESE)  # not a third of it
    assert worst_case_micros(PRICE, _body(max_tokens=10, n=4)) == one + 3 * 10 * 2
    image = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
    with_image = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, image]}]
    }
    assert prompt_tokens_estimate(with_image) > TOKENS_PER_IMAGE


def test_the_limit_reserved_for_is_the_one_sent_upstream_with_reasoning_under_it():
    body = _body(
        max_completion_tokens=10,
        max_tokens=16_000,
        reasoning={"max_tokens": 50_000, "effort": "high"},
        thinking={"type": "enabled", "budget_tokens": 4},
    )
    admission = Admission(key=None, run_id="r", price=PRICE, reserved_micros=0)

    forwarded = forwarded_body(admission, body)

    assert (forwarded["max_tokens"], forwarded["max_completion_tokens"]) == (10, 10)
    assert forwarded["reasoning"] == {"max_tokens": 10, "effort": "high"}
    assert forwarded["thinking"]["budget_tokens"] == 4
    unlimited = forwarded_body(admission, _body())
    assert (unlimited["max_tokens"], unlimited["max_completion_tokens"]) == (MAX_OUTPUT,) * 2


@pytest.mark.django_db(transaction=True)
def test_too_many_choices_are_refused_naming_n(covered_run, router_url, upstream):
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}
    answer = httpx.post(
        f"{router_url}/chat/completions", json=_body(n=MAX_CHOICES + 1), headers=headers
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "n"
    assert upstream.requests == []


def _every_token_allowed(body: dict) -> dict:
    """What an upstream that uses everything it is allowed reports: the prompt at a token a
    character, and the whole `max_tokens` for each of the `n` choices."""
    prompt = sum(len(m["content"]) for m in body["messages"])
    completion = body["max_tokens"] * body.get("n", 1)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_calls_using_all_they_may_never_take_a_run_past_its_cap(
    owner, harness, covered_model, router_url, upstream
):
    upstream.delay = 0.3  # every call is in flight while the others arrive
    upstream.usage_of = _every_token_allowed
    asked = _body(n=3, max_completion_tokens=10, max_tokens=MAX_OUTPUT)
    worst = worst_case_micros(PRICE, asked)
    run = make_run(owner.project, harness, cap_micros=worst * 8 + worst // 2)
    headers = {"Authorization": f"Bearer {run.plain_key}"}

    def call(i: int) -> int:
        body = {**asked, "stream": i % 2 == 0}
        with httpx.Client(timeout=60) as http:
            with http.stream(
                "POST", f"{router_url}/chat/completions", json=body, headers=headers
            ) as response:
                response.read()
                return response.status_code

    with ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(call, range(50)))

    # Eight fit at once; a call costing less than it reserved leaves room for one more later.
    served = statuses.count(200)
    assert served >= 8 and statuses.count(402) == 50 - served, statuses
    run = settled(run, spans=50)
    costs = [s.attributes["belvedir.router.cost_micros"] for s in Span.objects.filter(run=run)]
    assert run.covered_spent_micros == sum(costs) <= run.covered_cap_micros
    assert all(request["max_tokens"] == 10 for request in upstream.requests)


@pytest.mark.django_db(transaction=True)
def test_a_body_over_djangos_form_limit_passes_and_one_over_the_routers_is_a_413(
    covered_run, router_url, upstream
):
    headers = {"Authorization": f"Bearer {covered_run.plain_key}"}
    picture = base64.b64encode(b"\x89PNG" * 750_000).decode()  # a 3 MB data URL
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{picture}"}}
    body = {"model": MODEL, "messages": [{"role": "user", "content": [image]}]}

    answer = httpx.post(f"{router_url}/chat/completions", json=body, headers=headers, timeout=60)

    assert answer.status_code == 200, answer.text
    assert upstream.requests[0]["messages"][0]["content"][0] == image
    huge = "x" * (MAX_BODY_BYTES + 10)
    body = {"model": MODEL, "messages": [{"role": "user", "content": huge}]}
    answer = httpx.post(f"{router_url}/chat/completions", json=body, headers=headers, timeout=60)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "body_too_large"
    settled(covered_run, spans=1)
