// The legacy names: with only FRACTAL_* set (as the contract sets them beside BELVEDIR_*),
// initialize() and withSession() with no arguments find the key, the URL and the run id.
import assert from "node:assert/strict";
import { test } from "node:test";

import { attributes, capture } from "./capture.mjs";

test("FRACTAL_API_KEY, FRACTAL_BASE_URL and FRACTAL_RUN_ID are read when BELVEDIR_* are not set", async () => {
  const platform = await capture({ sessions: ["run_legacy"] });
  for (const name of ["API_KEY", "BASE_URL", "RUN_ID"]) delete process.env[`BELVEDIR_${name}`];
  process.env.FRACTAL_API_KEY = "bv_legacy";
  process.env.FRACTAL_BASE_URL = platform.url;
  process.env.FRACTAL_RUN_ID = "run_legacy";
  const sdk = await import("../dist/esm/index.js");
  sdk.initialize({ appName: "legacy" });
  await sdk.withSession({}, () => sdk.task("t", () => undefined));
  await sdk.flush();
  assert.equal(await sdk.reportOutcome("run_legacy", "success"), true);
  await platform.close();
  const [span] = platform.spans();
  assert.equal(attributes(span)["traceloop.association.properties.session_id"], "run_legacy");
  assert.ok(platform.requests.every((r) => r.headers.authorization === "Bearer bv_legacy"));
});
