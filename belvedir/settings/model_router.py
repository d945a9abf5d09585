"""Model calls the platform pays for or forwards: the router, covered usage, generation."""

from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envbool, envfloat, envint, envlist, envmicros, envstr
from belvedir.settings.jobs import Q_CLUSTER, Q_HOUSEKEEPING_CLUSTER

# The model router (router/): where covered runs' calls go, with the operator's key.
BELVEDIR_ROUTER_UPSTREAM_BASE = envstr(
    "BELVEDIR_ROUTER_UPSTREAM_BASE", "https://openrouter.ai/api/v1"
).rstrip("/")
# A run's own-key calls go to the model base its user named (belvedir/net_policy.py): one that
# resolves to an internal address (loopback, private, link-local, ...) is refused at launch and
# on every connection unless BELVEDIR_DEV=1 or the host (a name, an address or a CIDR) is
# listed here, comma-separated.
BELVEDIR_MODEL_HOST_ALLOWLIST = envlist("BELVEDIR_MODEL_HOST_ALLOWLIST", [])
BELVEDIR_ROUTER_UPSTREAM_TIMEOUT = envfloat("BELVEDIR_ROUTER_UPSTREAM_TIMEOUT", 600.0)
# What the router reads of an upstream's answer (router/bodies.py): a call's whole time from
# sending it to the last byte of a whole answer (or a stream's first; the timeout above is per
# read), and the most it reads of a whole answer and of an error answer. Past any of them the
# caller gets an OpenAI-style 504 or 502.
BELVEDIR_ROUTER_CALL_DEADLINE = envfloat("BELVEDIR_ROUTER_CALL_DEADLINE", 900.0)
BELVEDIR_ROUTER_MAX_ANSWER_BYTES = envint("BELVEDIR_ROUTER_MAX_ANSWER_BYTES", 32 * 2**20)
BELVEDIR_ROUTER_MAX_ERROR_BYTES = envint("BELVEDIR_ROUTER_MAX_ERROR_BYTES", 64 * 2**10)
# A path under /api/v1 the router does not serve (router.endpoints) is a 404; with this on, a
# running covered run's key passes it through to the upstream with the operator's key,
# untraced and not charged to the run (for calls that cost nothing, such as Anthropic's
# messages/count_tokens).
BELVEDIR_ROUTER_PASSTHROUGH = envbool("BELVEDIR_ROUTER_PASSTHROUGH", False)
# Which calls pass through, as "METHOD path" (comma-separated): any other is a 404 even with
# passthrough on (an upstream's batch, file or account endpoints bill, or read what other
# organizations' runs stored under the operator's key).


def _passthrough_calls(name: str, default: list[str]) -> frozenset[tuple[str, str]]:
    calls = set()
    for call in envlist(name, default):
        parts = call.split()
        if len(parts) != 2 or not parts[0].isalpha():
            raise ImproperlyConfigured(f'{name}: {call!r} is not "METHOD path"')
        calls.add((parts[0].upper(), parts[1].strip("/")))
    return frozenset(calls)


BELVEDIR_ROUTER_PASSTHROUGH_CALLS = _passthrough_calls(
    "BELVEDIR_ROUTER_PASSTHROUGH_CALLS", ["POST messages/count_tokens"]
)
# An answered call's settlement waits at most this long to be written with others' (router/
# settlement.py): fewer, larger writes, at the price of reservations held that much longer.
BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS = max(
    envfloat("BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS", 0.2), 0.0
)
# Covered model usage: a run that leaves its model key blank and names a covered model calls
# the router, which pays the operator's upstream with this key, up to the cap per run.
BELVEDIR_ROUTER_UPSTREAM_KEY = envstr("BELVEDIR_ROUTER_UPSTREAM_KEY", "")
BELVEDIR_COVERED_SPEND_CAP_MICROS = envmicros("BELVEDIR_COVERED_SPEND_CAP_USD", "2.00")
# The judge the judged cards (Belvedir Runner, Runner on Harbor) prefill as JUDGE_MODEL, and a
# run of one gets when neither the launch nor the harness names one: a covered model of the
# seeded catalog (no Chinese lab's, so any project may use it) when this platform covers usage,
# so its key can be left blank; else OpenRouter's openai/gpt-4.1-mini, with the user's key.
BELVEDIR_DEFAULT_JUDGE_MODEL = envstr(
    "BELVEDIR_DEFAULT_JUDGE_MODEL",
    "openai/gpt-oss-120b" if BELVEDIR_ROUTER_UPSTREAM_KEY else "openai/gpt-4.1-mini",
)
# Environment generation (harnesses/generation.py), a job on the housekeeping cluster: how long
# a job may take, retries included (below that cluster's 600 s timeout), and the output cap.
BELVEDIR_GENERATION_TIMEOUT = envint("BELVEDIR_GENERATION_TIMEOUT", 300, minimum=5)
BELVEDIR_GENERATION_MAX_TOKENS = envint("BELVEDIR_GENERATION_MAX_TOKENS", 16000, minimum=256)
if BELVEDIR_GENERATION_TIMEOUT >= Q_CLUSTER["ALT_CLUSTERS"][Q_HOUSEKEEPING_CLUSTER]["timeout"]:
    raise ImproperlyConfigured("BELVEDIR_GENERATION_TIMEOUT must be below 600 (the job's timeout)")
