"""A harness traced with the belvedir SDK: every LLM call it makes lands in the run's session.

It answers a few questions with the `openai` client against MODEL_API_BASE, inside
`belvedir.session(session_id=BELVEDIR_RUN_ID)` and a `belvedir.task(...)`, flushes the spans,
reports the outcome, and writes results.json. See README.md.
"""

import json
import os

from openai import OpenAI

import belvedir

QUESTIONS = [
    ("What is 2+2?", "4"),
    ("What is 3+1? Answer with a number.", "4"),
]


def main() -> int:
    env = os.environ
    run_id = env["BELVEDIR_RUN_ID"]
    # The SDK reads no environment variables: pass the platform's key and URL explicitly,
    # or the spans go to the SDK's default host.
    belvedir.initialize(
        api_key=env["BELVEDIR_API_KEY"],
        base_url=env["BELVEDIR_BASE_URL"],
        app_name="traced-harness",
    )
    client = OpenAI(
        base_url=env.get("MODEL_API_BASE") or None,
        api_key=env.get("MODEL_API_KEY") or "unused",
    )
    model = env.get("MODEL") or "gpt-4o-mini"

    answers = []
    with belvedir.session(session_id=run_id):
        with belvedir.task("answer questions"):
            for question, _ in QUESTIONS:
                response = client.chat.completions.create(
                    model=model,
                    messages=[
                        {"role": "system", "content": "Answer briefly."},
                        {"role": "user", "content": question},
                    ],
                    temperature=0,
                )
                answers.append(response.choices[0].message.content or "")
                print(f"Q: {question}\nA: {answers[-1]}", flush=True)

    correct = sum(
        expected in answer for (_, expected), answer in zip(QUESTIONS, answers, strict=True)
    )
    score = correct / len(QUESTIONS)
    # flush() sends every span now; only then does the platform know the session,
    # so report_outcome() comes after it.
    belvedir.flush()
    reported = belvedir.report_outcome(run_id, "success" if score >= 0.5 else "fail")
    print(f"score {score}; outcome reported: {reported}", flush=True)

    with open("results.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "score": score,
                "correct": correct,
                "total": len(QUESTIONS),
                "answers": answers,
                "model": model,
                "outcome_reported": reported,
            },
            f,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
