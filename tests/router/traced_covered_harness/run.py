"""A covered run's harness traced with the belvedir SDK: its openai client calls the router
(MODEL_API_BASE, the run key) inside `belvedir.session(session_id=BELVEDIR_RUN_ID)`, twice for
the model under test and once for its judge (JUDGE), so each call is seen by the SDK's span
and by the router's."""

import json
import os

import openai

import belvedir

env = os.environ
belvedir.initialize(
    api_key=env["BELVEDIR_API_KEY"], base_url=env["BELVEDIR_BASE_URL"], app_name="covered"
)
client = openai.OpenAI(base_url=env["MODEL_API_BASE"], api_key=env["MODEL_API_KEY"], max_retries=0)
question = [{"role": "user", "content": "What is 2 + 2?"}]

usage = []
with belvedir.session(session_id=env["BELVEDIR_RUN_ID"]):
    for model in (env["MODEL"], env["MODEL"], env["JUDGE"]):
        reply = client.chat.completions.create(model=model, messages=question)
        usage.append(reply.usage.total_tokens)
belvedir.flush()

with open("results.json", "w") as f:
    json.dump({"score": 1, "usage": usage}, f)
