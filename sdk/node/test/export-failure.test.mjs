// A batch the platform refuses is logged with "spans dropped" (the platform marks such a
// run's traces incomplete), and flush() still resolves.
import assert from "node:assert/strict";
import { test } from "node:test";

import { capture } from "./capture.mjs";

test("a refused export says 'spans dropped'; flush resolves", async () => {
  const platform = await capture({ traceStatus: 400 });
  const warnings = [];
  console.warn = (...args) => warnings.push(args.join(" "));
  const sdk = await import("../dist/esm/index.js");
  sdk.initialize({ apiKey: "k", baseUrl: platform.url, disableBatch: true });
  await sdk.withSession({ sessionId: "s" }, () => sdk.task("t", () => undefined));
  await sdk.flush();
  await platform.close();
  assert.equal(platform.spans().length, 1);
  assert.ok(warnings.some((w) => w.includes("spans dropped")), JSON.stringify(warnings));
});
