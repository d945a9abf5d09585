"""A harness of a covered run: it was given no model key of its own, only MODEL_API_BASE (the
router) and MODEL_API_KEY (the run key), and calls the model with the real openai client."""

import json
import os

import openai

client = openai.OpenAI(
    base_url=os.environ["MODEL_API_BASE"], api_key=os.environ["MODEL_API_KEY"], max_retries=0
)
model = os.environ["MODEL"]
question = [{"role": "user", "content": "What is 2 + 2?"}]

whole = client.chat.completions.create(model=model, messages=question)
stream = client.chat.completions.create(model=model, messages=question, stream=True)
streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
try:
    client.chat.completions.create(model="acme/not-covered", messages=question)
    refused = None
except openai.NotFoundError as exc:
    refused = exc.body.get("code") if isinstance(exc.body, dict) else str(exc.body)

with open("results.json", "w") as f:
    json.dump(
        {
            "score": 1,
            "answers": [whole.choices[0].message.content, streamed],
            "refused": refused,
            "base": os.environ["MODEL_API_BASE"],
            "usage": whole.usage.total_tokens,
        },
        f,
    )
