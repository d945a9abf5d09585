// The SDK against a recorder: span shapes (as the Python SDK's), flush waiting for the
// platform's answer, outcomes, and a failed export saying "spans dropped".
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { attributes, capture } from "./capture.mjs";

let platform;
let sdk;
const warnings = [];

before(async () => {
  platform = await capture({ delayMs: 300, sessions: ["s-1"] });
  const warn = console.warn;
  console.warn = (...args) => {
    warnings.push(args.join(" "));
    warn(...args);
  };
  sdk = await import("../dist/esm/index.js");
  sdk.initialize({ apiKey: "bv_test_key", baseUrl: `${platform.url}/`, appName: "unit" });
});

after(() => platform.close());

test("a session's task is a workflow span stamped with the session id, its children too", async () => {
  const inner = await sdk.withSession({ sessionId: "s-1", userId: "u1", metadata: { harness: "demo" } }, () =>
    sdk.task("answer the question", async () => {
      const { trace } = await import("@opentelemetry/api");
      trace.getTracer("child").startSpan("child").end();
      return 42;
    }),
  );
  assert.equal(inner, 42);
  const started = Date.now();
  await sdk.flush();
  // The recorder answers after 300 ms: flush resolved only once it had.
  assert.ok(Date.now() - started >= 250, "flush resolved before the platform answered");
  const spans = platform.spans();
  const workflow = spans.find((s) => s.name === "answer the question.workflow");
  const child = spans.find((s) => s.name === "child");
  assert.ok(workflow && child, JSON.stringify(spans.map((s) => s.name)));
  assert.deepEqual(attributes(workflow), {
    "traceloop.workflow.name": "answer the question",
    "traceloop.association.properties.session_id": "s-1",
    "traceloop.association.properties.user_id": "u1",
    "traceloop.association.properties.harness": "demo",
    "traceloop.span.kind": "workflow",
    "traceloop.entity.name": "answer the question",
  });
  assert.equal(workflow.kind, 1);
  assert.equal(workflow.status.code, 0);
  assert.equal(workflow.parentSpanId, undefined);
  assert.equal(child.parentSpanId, workflow.spanId);
  assert.equal(attributes(child)["traceloop.association.properties.session_id"], "s-1");
  assert.equal(attributes(child)["traceloop.workflow.name"], "answer the question");
  const request = platform.requests.find((r) => r.url === "/api/v1/traces");
  assert.equal(request.headers.authorization, "Bearer bv_test_key");
  assert.match(request.headers["content-type"], /^application\/json/);
});

test("a task that throws ends with status ERROR and an exception event, and rethrows", async () => {
  await assert.rejects(
    sdk.withSession({ sessionId: "s-1" }, () =>
      sdk.task("failing task", () => {
        throw new Error("boom");
      }),
    ),
    /boom/,
  );
  await sdk.flush();
  const failing = platform.spans().find((s) => s.name === "failing task.workflow");
  assert.deepEqual(failing.status, { code: 2, message: "boom" });
  assert.deepEqual(
    failing.events.map((e) => e.name),
    ["exception"],
  );
});

test("spans outside a session carry no session id; a nested session replaces the outer", async () => {
  await sdk.task("loose", () => undefined);
  await sdk.withSession({ sessionId: "outer" }, () =>
    sdk.withSession({ sessionId: "inner" }, () => sdk.task("nested", () => undefined)),
  );
  await sdk.flush();
  const byName = Object.fromEntries(platform.spans().map((s) => [s.name, attributes(s)]));
  assert.equal(byName["loose.workflow"]["traceloop.association.properties.session_id"], undefined);
  assert.equal(byName["nested.workflow"]["traceloop.association.properties.session_id"], "inner");
});

test("reportOutcome: true when accepted, false on 404 and on a bad outcome", async () => {
  assert.equal(await sdk.reportOutcome("s-1", "success"), true);
  assert.equal(await sdk.reportOutcome("unknown", "fail"), false);
  assert.equal(await sdk.reportOutcome("s-1", "maybe"), false);
  const outcomes = platform.requests.filter((r) => r.url === "/api/v1/outcomes");
  assert.deepEqual(
    outcomes.map((r) => r.body),
    [
      { session_id: "s-1", outcome: "success" },
      { session_id: "unknown", outcome: "fail" },
    ],
  );
  assert.equal(outcomes[0].headers.authorization, "Bearer bv_test_key");
});

test("a second initialize() is ignored", () => {
  sdk.initialize({ apiKey: "other", baseUrl: "http://127.0.0.1:9" });
  assert.ok(warnings.some((w) => w.includes("more than once")));
});

test("the CommonJS build is the same API", async () => {
  const { createRequire } = await import("node:module");
  const cjs = createRequire(import.meta.url)("../dist/cjs/index.js");
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(sdk).sort());
});

test("a fetch inside a span carries its W3C traceparent; outside one, or set already, not", async () => {
  const url = `${platform.url}/echo`;
  const before = platform.requests.length;
  let taskSpan;
  await sdk.task("fetching", async () => {
    const { trace, context } = await import("@opentelemetry/api");
    taskSpan = trace.getSpan(context.active()).spanContext();
    await fetch(url, { method: "POST", body: "{}" });
    await fetch(new Request(url, { method: "POST", body: "{}", headers: { traceparent: "00-keep" } }));
  });
  await fetch(url, { method: "POST", body: "{}" });
  const sent = platform.requests.slice(before).filter((r) => r.url === "/echo");
  assert.deepEqual(
    sent.map((r) => r.headers.traceparent),
    [`00-${taskSpan.traceId}-${taskSpan.spanId}-01`, "00-keep", undefined],
  );
});
