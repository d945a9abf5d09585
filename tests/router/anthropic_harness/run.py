"""A harness of a covered run whose model is Anthropic's: it was given no key of its own, only
ANTHROPIC_BASE_URL (the router's /api) and ANTHROPIC_API_KEY (the run key), and calls
Anthropic's Messages API as Claude Code and the Anthropic SDKs do: POST
{ANTHROPIC_BASE_URL}/v1/messages with the key as x-api-key and an anthropic-version, whole and
streamed, with the bare model name Harbor gives Claude Code. Standard library only."""

import json
import os
import urllib.request

base, key = os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"]
model = os.environ["MODEL"].removeprefix("anthropic/")
question = [{"role": "user", "content": "What is 2 + 2?"}]


def post(body: dict) -> bytes:
    request = urllib.request.Request(
        f"{base}/v1/messages",
        data=json.dumps(body).encode(),
        headers={
            "x-api-key": key,
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


body = {"model": model, "max_tokens": 64, "system": "Be terse.", "messages": question}
whole = json.loads(post(body))
events, streamed = [], []
for line in post({**body, "stream": True}).decode().splitlines():
    if line.startswith("event: "):
        events.append(line[7:])
    elif line.startswith("data: "):
        data = json.loads(line[6:])
        if data.get("type") == "content_block_delta":
            streamed.append(data["delta"].get("text", ""))

with open("results.json", "w") as f:
    json.dump(
        {
            "score": 1,
            "answers": [whole["content"][0]["text"], "".join(streamed)],
            "events": events,
            "base": base,
            "usage": whole["usage"],
            # What this sandbox was given: the platform's key only, never the operator's.
            "env_values": sorted(os.environ.values()),
        },
        f,
    )
