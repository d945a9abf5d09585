/**
 * The Belvedir SDK for Node: traces an agent's LLM calls into Belvedir sessions and tasks.
 *
 * The same API and the same spans as the Python SDK (PyPI `belvedir` 0.6.4), on the same
 * libraries: Traceloop/OpenLLMetry (`@traceloop/node-server-sdk`) instruments `openai`,
 * `@anthropic-ai/sdk`, LangChain, ...; `@opentelemetry/exporter-trace-otlp-http` sends the
 * spans as OTLP/JSON to `{baseUrl}/api/v1/traces` with `Authorization: Bearer {apiKey}`.
 *
 *     import { initialize, withSession, task, flush, reportOutcome } from "belvedir";
 *
 *     initialize({ apiKey: process.env.BELVEDIR_API_KEY, baseUrl: process.env.BELVEDIR_BASE_URL,
 *                  appName: "my-benchmark" });
 *     await withSession({ sessionId: process.env.BELVEDIR_RUN_ID }, async () => {
 *       await task("answer questions", async () => { ... run your agent ... });
 *     });
 *     await flush();
 *     await reportOutcome(process.env.BELVEDIR_RUN_ID, "success");
 *
 * Published as `belvedir` and, for harnesses written against the old name, as
 * `@fractalresearch/loop`: the same build, which reads the legacy FRACTAL_* variables too.
 */
import { context, createContextKey, isSpanContextValid, SpanStatusCode, trace, } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import * as traceloop from "@traceloop/node-server-sdk";
export const DEFAULT_BASE_URL = "https://platform.belvedir.ai";
export const VERSION = "0.1.0";
// The context keys Traceloop's span processor reads in onStart to stamp every span it starts
// (`traceloop.association.properties.*`, `traceloop.workflow.name`). OpenTelemetry's
// createContextKey is Symbol.for(name), so these are Traceloop's own keys.
const ASSOCIATION_PROPERTIES_KEY = createContextKey("association_properties");
const WORKFLOW_NAME_KEY = createContextKey("workflow_name");
const TRACER_NAME = "belvedir";
const OUTCOME_TIMEOUT_MS = 15_000;
const EXPORT_TIMEOUT_MS = 10_000;
let initialized = false;
let outcomeConfig;
function env(name) {
    const value = process.env[`BELVEDIR_${name}`] || process.env[`FRACTAL_${name}`];
    return value ? value : undefined;
}
function warn(message) {
    console.warn(`[belvedir] ${message}`);
}
/**
 * The OTLP/HTTP JSON exporter, saying so when a batch is lost: a failed export logs
 * "spans dropped", the words the platform looks for in a run's output to mark its traces
 * incomplete (the Python SDK logs the same).
 */
class BelvedirExporter {
    inner;
    constructor(inner) {
        this.inner = inner;
    }
    export(spans, done) {
        this.inner.export(spans, (result) => {
            if (result.code !== 0) {
                const why = result.error ? `: ${result.error.message}` : "";
                warn(`trace export failed${why}; spans dropped.`);
            }
            done(result);
        });
    }
    shutdown() {
        return this.inner.shutdown();
    }
    forceFlush() {
        return this.inner.forceFlush();
    }
}
/**
 * Initialize the SDK: call once, at process start, before the agent's clients are created.
 * A second call is ignored. Never throws: on failure the app runs untraced.
 */
export function initialize(options = {}) {
    if (initialized) {
        warn("initialize() called more than once; ignoring.");
        return;
    }
    const apiKey = options.apiKey || env("API_KEY") || "";
    const baseUrl = (options.baseUrl || env("BASE_URL") || DEFAULT_BASE_URL).replace(/\/+$/, "");
    // Set before tracing starts, so outcomes are reported even if tracing fails to start.
    outcomeConfig = { apiKey, baseUrl };
    try {
        const exporter = new BelvedirExporter(new OTLPTraceExporter({
            url: `${baseUrl}/api/v1/traces`,
            headers: { Authorization: `Bearer ${apiKey}` },
            timeoutMillis: EXPORT_TIMEOUT_MS,
        }));
        traceloop.initialize({
            appName: options.appName || "belvedir-app",
            // No apiKey for Traceloop itself: with one it would make a client for api.traceloop.com
            // and upload prompt images there. Our exporter carries the key.
            exporter,
            disableBatch: options.disableBatch ?? false,
            traceloopSyncEnabled: false,
            silenceInitializationMessage: true,
            // Traceloop's type names every module it can patch; ours stays loose on purpose, so a
            // harness needs none of their type packages.
            // eslint-disable-next-line @typescript-eslint/no-explicit-any
            instrumentModules: options.instrumentModules,
        });
        initialized = true;
        propagateTraceContext();
        // Python's SDK flushes at exit; so does this one when the event loop runs dry.
        process.once("beforeExit", () => {
            void flush();
        });
    }
    catch (err) {
        warn(`initialize() failed; the app will run untraced. ${String(err)}`);
    }
}
const PROPAGATING = Symbol.for("belvedir.traceparent");
/**
 * Give every `fetch` made inside a span a W3C `traceparent` naming that span, as the Python
 * SDK's instrumented HTTP clients do: an LLM client's request then carries its LLM span's
 * context (Traceloop's instrumentation makes the span active around the call), and the model
 * router's span of the call continues it. Traceloop instruments no HTTP client in Node, so the
 * global `fetch` is wrapped: when this module is loaded, so that a client built after the
 * import but before initialize() holds the wrapped one (until a span is active, which needs
 * initialize(), it adds nothing), and again at initialize() if something replaced the global
 * since. A request that has a `traceparent` keeps it.
 */
function propagateTraceContext() {
    const original = globalThis.fetch;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    if (typeof original !== "function" || original[PROPAGATING])
        return;
    const wrapped = (input, init) => {
        const span = trace.getSpan(context.active())?.spanContext();
        if (!span || !isSpanContextValid(span))
            return original(input, init);
        const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
        if (headers.has("traceparent"))
            return original(input, init);
        const flags = (span.traceFlags & 0xff).toString(16).padStart(2, "0");
        headers.set("traceparent", `00-${span.traceId}-${span.spanId}-${flags}`);
        return original(input, { ...init, headers });
    };
    Object.defineProperty(wrapped, PROPAGATING, { value: true });
    globalThis.fetch = wrapped;
}
propagateTraceContext();
/**
 * Run `fn` inside a session: every span started in it (LLM calls, HTTP, tasks) carries
 * `traceloop.association.properties.session_id`. A nested session replaces the outer one.
 */
export async function withSession(options, fn) {
    const sessionId = options.sessionId ?? env("RUN_ID");
    if (sessionId === undefined || sessionId === "") {
        warn("withSession() without a sessionId; spans will have no session.");
        return await fn();
    }
    const properties = { session_id: String(sessionId) };
    if (options.userId !== undefined)
        properties.user_id = String(options.userId);
    for (const [key, value] of Object.entries(options.metadata ?? {})) {
        properties[String(key)] = String(value);
    }
    const ctx = context.active().setValue(ASSOCIATION_PROPERTIES_KEY, properties);
    return await context.with(ctx, async () => await fn());
}
/**
 * Run `fn` as a task: a workflow span `"{name}.workflow"` (`traceloop.span.kind = workflow`,
 * `traceloop.entity.name`, `traceloop.workflow.name` on it and on every span inside), the
 * platform's anchor for a task. Ends with status ERROR and an `exception` event when `fn`
 * throws, and rethrows. Before initialize(), `fn` runs untraced.
 */
export async function task(name, fn) {
    if (!initialized)
        return await fn();
    const kind = "workflow";
    const withName = context.active().setValue(WORKFLOW_NAME_KEY, name);
    return await context.with(withName, async () => {
        // Traceloop's span processor reads the active context in onStart: start the span here.
        const span = trace.getTracer(TRACER_NAME, VERSION).startSpan(`${name}.${kind}`);
        span.setAttribute("traceloop.span.kind", kind);
        span.setAttribute("traceloop.entity.name", name);
        try {
            return await context.with(trace.setSpan(context.active(), span), async () => await fn());
        }
        catch (err) {
            const error = err instanceof Error ? err : new Error(String(err));
            span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
            span.recordException(error);
            throw err;
        }
        finally {
            span.end();
        }
    });
}
/**
 * Report a session's ground truth (`"success"` or `"fail"`) to `POST {baseUrl}/api/v1/outcomes`.
 * Resolves true when the platform accepted it; false otherwise (a session it has not seen
 * yet is a 404: flush() first), and before initialize(). Never rejects.
 */
export async function reportOutcome(sessionId, outcome) {
    if (outcome !== "success" && outcome !== "fail") {
        warn("reportOutcome: outcome must be 'success' or 'fail'.");
        return false;
    }
    if (outcomeConfig === undefined) {
        warn("reportOutcome() called before initialize(); ignored.");
        return false;
    }
    try {
        const response = await fetch(`${outcomeConfig.baseUrl}/api/v1/outcomes`, {
            method: "POST",
            headers: {
                "Content-Type": "application/json",
                Authorization: `Bearer ${outcomeConfig.apiKey}`,
            },
            body: JSON.stringify({ session_id: String(sessionId), outcome }),
            signal: AbortSignal.timeout(OUTCOME_TIMEOUT_MS),
        });
        if (response.ok)
            return true;
        warn(`reportOutcome(${sessionId}) failed: HTTP ${response.status}`);
    }
    catch (err) {
        warn(`reportOutcome(${sessionId}) failed: ${String(err)}`);
    }
    return false;
}
/**
 * Export every ended span now; resolves once the platform has answered for all of them
 * (or the export failed, which is logged). Call it before the process exits. Never rejects.
 */
export async function flush() {
    if (!initialized)
        return;
    try {
        await traceloop.forceFlush();
    }
    catch (err) {
        warn(`flush() failed; spans may be lost. ${String(err)}`);
    }
}
