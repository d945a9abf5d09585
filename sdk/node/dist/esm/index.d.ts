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
export declare const DEFAULT_BASE_URL = "https://platform.belvedir.ai";
export declare const VERSION = "0.1.0";
export type Outcome = "success" | "fail";
export interface InitializeOptions {
    /** The project or run key. Default: BELVEDIR_API_KEY, else FRACTAL_API_KEY. */
    apiKey?: string;
    /** The platform's URL. Default: BELVEDIR_BASE_URL, else FRACTAL_BASE_URL, else DEFAULT_BASE_URL. */
    baseUrl?: string;
    /** The `service.name` of every span. */
    appName?: string;
    /** Export each span as it ends instead of in batches. */
    disableBatch?: boolean;
    /**
     * Modules to instrument explicitly, as Traceloop's `instrumentModules` (`{ openAI: OpenAI,
     * anthropic: Anthropic, ... }`). Needed for clients loaded as ES modules, which are imported
     * before `initialize()` runs and which Traceloop's require hook never sees.
     */
    instrumentModules?: Record<string, unknown>;
}
export interface SessionOptions {
    /** The session id; a run's harness uses BELVEDIR_RUN_ID. Default: BELVEDIR_RUN_ID, else FRACTAL_RUN_ID. */
    sessionId?: string;
    userId?: string;
    metadata?: Record<string, string>;
}
/**
 * Initialize the SDK: call once, at process start, before the agent's clients are created.
 * A second call is ignored. Never throws: on failure the app runs untraced.
 */
export declare function initialize(options?: InitializeOptions): void;
/**
 * Run `fn` inside a session: every span started in it (LLM calls, HTTP, tasks) carries
 * `traceloop.association.properties.session_id`. A nested session replaces the outer one.
 */
export declare function withSession<T>(options: SessionOptions, fn: () => T | Promise<T>): Promise<T>;
/**
 * Run `fn` as a task: a workflow span `"{name}.workflow"` (`traceloop.span.kind = workflow`,
 * `traceloop.entity.name`, `traceloop.workflow.name` on it and on every span inside), the
 * platform's anchor for a task. Ends with status ERROR and an `exception` event when `fn`
 * throws, and rethrows. Before initialize(), `fn` runs untraced.
 */
export declare function task<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
/**
 * Report a session's ground truth (`"success"` or `"fail"`) to `POST {baseUrl}/api/v1/outcomes`.
 * Resolves true when the platform accepted it; false otherwise (a session it has not seen
 * yet is a 404: flush() first), and before initialize(). Never rejects.
 */
export declare function reportOutcome(sessionId: string, outcome: Outcome): Promise<boolean>;
/**
 * Export every ended span now; resolves once the platform has answered for all of them
 * (or the export failed, which is logged). Call it before the process exits. Never rejects.
 */
export declare function flush(): Promise<void>;
