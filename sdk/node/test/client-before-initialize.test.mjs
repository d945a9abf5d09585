// A client built before initialize() (after the package is imported, as an ES module's
// imports all are) still sends its LLM span's W3C traceparent: the package wraps the global
// fetch when it is loaded, and the wrapper adds nothing until a span is active.
import assert from "node:assert/strict";
import { test } from "node:test";

import OpenAI from "openai";

import * as sdk from "../dist/esm/index.js";
import { capture } from "./capture.mjs";

test("an openai client made before initialize() sends its call's traceparent", async () => {
  const platform = await capture();
  const client = new OpenAI({ baseURL: `${platform.url}/v1`, apiKey: "sk-test" });
  const early = globalThis.fetch;
  await early(`${platform.url}/before`, { method: "POST", body: "{}" }); // no span: nothing added
  sdk.initialize({
    apiKey: "bv_test_key",
    baseUrl: platform.url,
    appName: "early-client",
    instrumentModules: { openAI: OpenAI },
  });
  await sdk.withSession({ sessionId: "s-early" }, () =>
    sdk.task("ask", () =>
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "2+2?" }] }),
    ),
  );
  await sdk.flush();
  await platform.close();
  const call = platform.requests.find((r) => r.url === "/v1/chat/completions");
  const llm = platform.spans().find((s) => s.name === "chat m");
  assert.ok(llm, JSON.stringify(platform.spans().map((s) => s.name)));
  assert.equal(call.headers.traceparent, `00-${llm.traceId}-${llm.spanId}-01`);
  assert.equal(platform.requests.find((r) => r.url === "/before").headers.traceparent, undefined);
  // The trace export itself carries none (it is made outside any span).
  const exports = platform.requests.filter((r) => r.url === "/api/v1/traces");
  assert.ok(exports.length > 0 && exports.every((r) => r.headers.traceparent === undefined));
});
