// A harness with the Node SDK, driven by tests/traces/test_node_sdk.py against the live
// platform: PACKAGE is "belvedir" or "@fractalresearch/loop"; with LEGACY_ENV=1 it passes
// nothing to initialize() and withSession(), so the SDK reads FRACTAL_* itself.
// Two chat calls in task "answer questions", one task that throws, then flush(); prints
// FLUSHED and waits for a line on stdin (the test counts the stored spans meanwhile), then
// reports the outcome and an unknown session's, and prints RESULT <json>.
import OpenAI from "openai";
import { createInterface } from "node:readline";

const sdk = await import(process.env.PACKAGE);
const legacy = process.env.LEGACY_ENV === "1";
const runId = legacy ? process.env.FRACTAL_RUN_ID : process.env.BELVEDIR_RUN_ID;

sdk.initialize(
  legacy
    ? { appName: "node-sdk-test", instrumentModules: { openAI: OpenAI } }
    : {
        apiKey: process.env.BELVEDIR_API_KEY,
        baseUrl: process.env.BELVEDIR_BASE_URL,
        appName: "node-sdk-test",
        instrumentModules: { openAI: OpenAI },
      },
);
const client = new OpenAI({ baseURL: process.env.MODEL_API_BASE, apiKey: "sk-fake" });

const answers = [];
// The user and metadata the Python SDK's capture has (tests/traces/fixtures/sdk_batch.json).
const session = { userId: "u1", metadata: { harness: "demo" } };
await sdk.withSession(legacy ? session : { sessionId: runId, ...session }, async () => {
  await sdk.task("answer questions", async () => {
    for (const question of ["What is 2+2?", "What is 3+1?"]) {
      const response = await client.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [
          { role: "system", content: "Answer briefly." },
          { role: "user", content: question },
        ],
        temperature: 0,
      });
      answers.push(response.choices[0].message.content);
    }
  });
  await sdk.task("failing task", () => {
    throw new Error("boom");
  }).catch(() => undefined);
});

await sdk.flush();
console.log("FLUSHED");
const lines = createInterface({ input: process.stdin });
for await (const _ of lines) break;
lines.close();

const reported = await sdk.reportOutcome(runId, "success");
const unknown = await sdk.reportOutcome("no-such-session", "fail");
console.log(`RESULT ${JSON.stringify({ answers, reported, unknown })}`);
