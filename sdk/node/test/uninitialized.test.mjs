// Before initialize(): task() runs its function untraced, reportOutcome() is false without a
// request, flush() resolves; nothing throws.
import assert from "node:assert/strict";
import { test } from "node:test";

test("before initialize()", async () => {
  console.warn = () => {};
  const sdk = await import("../dist/esm/index.js");
  assert.equal(await sdk.task("t", () => 7), 7);
  assert.equal(await sdk.withSession({ sessionId: "s" }, async () => 8), 8);
  assert.equal(await sdk.reportOutcome("s", "success"), false);
  await sdk.flush();
});
