// A recorder on 127.0.0.1 standing in for the platform: keeps every request, answers
// /api/v1/traces with `traceStatus` after `delayMs`, /api/v1/outcomes with 200 for a known
// session and 404 otherwise, and /v1/chat/completions as a model would (COMPLETION).
import http from "node:http";

export const COMPLETION = {
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  choices: [{ index: 0, message: { role: "assistant", content: "4" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 },
};

export async function capture({ traceStatus = 200, delayMs = 0, sessions = [] } = {}) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const entry = { url: req.url, headers: req.headers, body: JSON.parse(body || "null") };
      setTimeout(() => {
        let status = 404;
        if (req.url === "/api/v1/traces") status = traceStatus;
        if (req.url === "/api/v1/outcomes") status = sessions.includes(entry.body?.session_id) ? 200 : 404;
        const model = req.url === "/v1/chat/completions";
        requests.push(entry);
        res.writeHead(model ? 200 : status, { "Content-Type": "application/json" });
        res.end(model ? JSON.stringify({ ...COMPLETION, model: entry.body?.model }) : "{}");
      }, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    spans: () =>
      requests
        .filter((r) => r.url === "/api/v1/traces")
        .flatMap((r) => r.body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans))),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

export function attributes(span) {
  return Object.fromEntries(
    span.attributes.map(({ key, value }) => [key, Object.values(value)[0]]),
  );
}
