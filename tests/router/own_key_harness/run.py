"""A plain harness (no SDK, the standard library only) launched with its user's own model key:
it calls MODEL_API_BASE with MODEL_API_KEY, whole and streamed, as any OpenAI-compatible
client would, after waiting for the test to look inside its sandbox (.belvedir-go)."""

import json
import os
import time
import urllib.request

base, key, model = (os.environ[k] for k in ("MODEL_API_BASE", "MODEL_API_KEY", "MODEL"))
question = [{"role": "user", "content": "What is 2 + 2?"}]
with open("sandbox-env.json", "w") as f:  # a file the key must not be in either
    json.dump(dict(os.environ), f)
deadline = time.monotonic() + 300
while not os.path.exists(".belvedir-go") and time.monotonic() < deadline:
    time.sleep(0.2)


def call(stream: bool) -> str:
    body = json.dumps({"model": model, "messages": question, "stream": stream}).encode()
    request = urllib.request.Request(
        f"{base.rstrip('/')}/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    if not stream:
        return json.loads(text)["choices"][0]["message"]["content"]
    events = [line[6:] for line in text.splitlines() if line.startswith("data: {")]
    chunks = [json.loads(e)["choices"] for e in events]
    return "".join(c[0]["delta"].get("content") or "" for c in chunks if c)


answers = [call(False), call(True)]
print(f"answers: {answers}", flush=True)
with open("results.json", "w") as f:
    json.dump({"score": 1, "answers": answers, "base": base}, f)
