"""What the local fake upstream (`tests.router.fake_upstream`) answers on the paths other
than chat completions: OpenAI's completions, embeddings and responses, and Anthropic's
Messages API (`/v1/messages`, its events as Anthropic streams them: message_start with the
input usage, content_block_start/delta/stop, message_delta with the output usage,
message_stop), each whole or streamed; and Anthropic's `messages/count_tokens`.

Each function takes the request's body, the reply's words and the usage the fake reports
(OpenAI's prompt_tokens and completion_tokens; for Anthropic's, also its prompt-cache counts
when the usage names them, and `message_delta_usage`: what the final message_delta's usage
says beside the output), and gives the document or the events."""

EMBEDDING = [0.25, -0.5, 0.125]


def _text(words: list[str]) -> str:
    return " ".join(words)


def completion(body: dict, words: list[str], usage: dict) -> dict:
    return {
        "id": "cmpl-fake",
        "object": "text_completion",
        "model": body.get("model"),
        "choices": [{"index": 0, "text": _text(words), "finish_reason": "stop"}],
        "usage": usage,
    }


def completion_events(body: dict, words: list[str], usage: dict) -> list[dict]:
    events = [
        {
            "object": "text_completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "text": (" " if i else "") + w, "finish_reason": None}],
        }
        for i, w in enumerate(words)
    ]
    events.append({"model": body.get("model"), "choices": [{"text": "", "finish_reason": "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({"model": body.get("model"), "choices": [], "usage": usage})
    return events


def embeddings(body: dict, usage: dict) -> dict:
    inputs = body.get("input") if isinstance(body.get("input"), list) else [body.get("input")]
    return {
        "object": "list",
        "model": body.get("model"),
        "data": [
            {"object": "embedding", "index": i, "embedding": EMBEDDING} for i in range(len(inputs))
        ],
        "usage": {"prompt_tokens": usage["prompt_tokens"], "total_tokens": usage["prompt_tokens"]},
    }


def _responses_usage(usage: dict) -> dict:
    return {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }


def response(body: dict, words: list[str], usage: dict) -> dict:
    return {
        "id": "resp_fake",
        "object": "response",
        "status": "completed",
        "model": body.get("model"),
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": _text(words), "annotations": []}],
            }
        ],
        "usage": _responses_usage(usage),
    }


def response_events(body: dict, words: list[str], usage: dict) -> list[tuple[str, dict]]:
    started = {"id": "resp_fake", "object": "response", "status": "in_progress"}
    started["model"] = body.get("model")
    events = [("response.created", {"type": "response.created", "response": started})]
    for i, word in enumerate(words):
        delta = {"type": "response.output_text.delta", "delta": (" " if i else "") + word}
        events.append(("response.output_text.delta", delta))
    done = {"type": "response.completed", "response": response(body, words, usage)}
    events.append(("response.completed", done))
    return events


ANTHROPIC_CACHE_USAGE = ("cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation")


def _anthropic_usage(usage: dict) -> dict:
    # The cache's counts and the passes of an answer that made more than one (`iterations`).
    cache = {name: usage[name] for name in (*ANTHROPIC_CACHE_USAGE, "iterations") if name in usage}
    return {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        **cache,
    }


def message(body: dict, words: list[str], usage: dict) -> dict:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": [{"type": "text", "text": _text(words)}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage),
    }


def message_events(body: dict, words: list[str], usage: dict) -> list[tuple[str, dict]]:
    start = {**message(body, [], usage), "content": [], "stop_reason": None}
    start["usage"] = {**_anthropic_usage(usage), "output_tokens": 1}
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for i, word in enumerate(words):
        delta = {"type": "text_delta", "text": (" " if i else "") + word}
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    final = {"output_tokens": usage["completion_tokens"], **usage.get("message_delta_usage", {})}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": final}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def count_tokens(body: dict) -> dict:
    return {"input_tokens": 42}
