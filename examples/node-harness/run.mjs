// A Node harness traced with the belvedir SDK that every sandbox image carries (docs/sdk-node.md).
//
// It answers a few questions with the `openai` npm client against MODEL_API_BASE, each inside
// task("answer question") within withSession({ sessionId: BELVEDIR_RUN_ID }), flushes the
// spans, reports the outcome, and writes results.json. SDK_PACKAGE=@fractalresearch/loop runs
// it as a Fractal-era harness: that package name and the FRACTAL_* variables.
import { writeFileSync } from "node:fs";

import OpenAI from "openai";

const sdkPackage = process.env.SDK_PACKAGE || "belvedir";
const { initialize, withSession, task, flush, reportOutcome } = await import(sdkPackage);
const prefix = sdkPackage === "belvedir" ? "BELVEDIR" : "FRACTAL";
const contract = (name) => process.env[`${prefix}_${name}`];

const QUESTIONS = [
  ["What is 2+2?", "4"],
  ["What is 3+1? Answer with a number.", "4"],
];

initialize({
  apiKey: contract("API_KEY"),
  baseUrl: contract("BASE_URL"),
  appName: "node-harness",
  // `openai` is an ES module imported above, before initialize(): hand it to the SDK so its
  // calls are traced (a require()d client is found without this).
  instrumentModules: { openAI: OpenAI },
});

const client = new OpenAI({
  baseURL: process.env.MODEL_API_BASE || undefined,
  apiKey: process.env.MODEL_API_KEY || "unused",
});
const model = process.env.MODEL || "gpt-4o-mini";
const runId = contract("RUN_ID");

const answers = [];
await withSession({ sessionId: runId }, async () => {
  for (const [question] of QUESTIONS) {
    await task("answer question", async () => {
      const response = await client.chat.completions.create({
        model,
        messages: [
          { role: "system", content: "Answer briefly." },
          { role: "user", content: question },
        ],
        temperature: 0,
      });
      answers.push(response.choices[0].message.content ?? "");
      console.log(`Q: ${question}\nA: ${answers.at(-1)}`);
    });
  }
});

const correct = QUESTIONS.filter(([, expected], i) => answers[i].includes(expected)).length;
const score = correct / QUESTIONS.length;
// Required: the sandbox exits right after this command. flush() resolves once the platform
// has every span, so the session exists by the time the outcome is reported.
await flush();
const reported = await reportOutcome(runId, score >= 0.5 ? "success" : "fail");
console.log(`score ${score}; outcome reported: ${reported}`);

writeFileSync(
  "results.json",
  JSON.stringify({ score, correct, total: QUESTIONS.length, answers, model, outcome_reported: reported }),
);
