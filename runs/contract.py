"""The harness contract: env vars in, results.json out, the entrypoint in between.

A run's sandbox env and the list of its secrets are assembled here, once: `run_sandbox_env`
(what the run's worker gives its sandbox) and `run_secret_values` (what its log, results,
notes and spans are redacted of); the managed Harbor workspace reads the harness env through
`run_harness_env` too."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from belvedir import crypto
from harnesses import env_secrets
from models_registry.inference import anthropic_base, is_anthropic
from models_registry.selectors import hf_token_value
from models_registry.signing import AdapterGrant, adapter_token, adapter_url
from runs.model_access import router_base
from runs.results import task_results
from sandboxes import entrypoint

if TYPE_CHECKING:
    from runs.models import Run

RESULTS_MAX_BYTES = 256 * 1024
LOG_TAIL_BYTES = 16 * 1024
WORKSPACE = entrypoint.WORKSPACE
REPO_DIR = f"{WORKSPACE}/repo"
CONTROL_DIR = f"{WORKSPACE}/.belvedir"
STAGE_FILE = f"{CONTROL_DIR}/stage"

ENTRYPOINT_FILE = entrypoint.ENTRYPOINT_FILE
STAGE_KEY_FILE = f"{CONTROL_DIR}/stage_key"
# The entrypoint's signed exit code, written as it ends (see sandboxes/entrypoint.py).
EXIT_FILE = entrypoint.EXIT_FILE
# The sandbox's command: sandboxes/entrypoint.py, out of reach of the harness's env.
COMMAND = list(entrypoint.COMMAND)
# What the stage file holds after a stage ("tasks", "install") failed: only the sandbox's
# entrypoint knows the key, so a harness cannot write it.
stage_marker = entrypoint.stage_marker
# The line the entrypoint prints as the run command starts: the run page's "running" stage.
# (Only a display hint: a harness that prints it itself moves no decision, only its stage.)
RUN_STAGE_LINE = entrypoint.RUN_STAGE_LINE

# What the platform's served drivers print before a line saying why they stopped (a setting
# they refuse, a registry dataset offline): that line becomes the failed run's note too.
DRIVER_NOTE_PREFIXES = {
    "harness-harbor": "belvedir-harbor: ",
    "belvedir-runner": "belvedir-runner: ",
}
DRIVER_NOTE_LINES = 50
# What the belvedir SDK's exporter ("[belvedir/loop] trace export failed...; spans dropped.")
# and the served drivers print when spans could not be sent: the run's trace is incomplete.
SPANS_DROPPED = "spans dropped"
# How many errored tasks a note names (with their reasons) before "and N more".
ERRORED_NAMED = 3

REDACTED = "[redacted]"
SECRET_MIN_CHARS = 4  # shorter values are too common to redact


def secrets_for_redaction(values) -> list[str]:
    """The secrets worth redacting, as written and as Python's repr and JSON escape them (a
    note quotes with repr, a harness may print JSON), longest first (so a secret inside
    another goes second)."""
    found = set()
    for value in values:
        if value and len(value) >= SECRET_MIN_CHARS:
            found |= {value, repr(value)[1:-1], json.dumps(value)[1:-1]}
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def redact_json(value, secrets: list[str]):
    """`value` (JSON-shaped: dicts, lists, strings, numbers) with the secrets redacted from
    every string in it, keys included."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_text(str(k), secrets): redact_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, secrets) for v in value]
    return value


def clip_log_tail(text: str, limit: int = LOG_TAIL_BYTES) -> str:
    """The end of `text` that fits in `limit` UTF-8 bytes (never half a character)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[-limit:].decode("utf-8", errors="ignore")


def tasks_filename(tasks: str) -> str:
    try:
        json.loads(tasks)
    except ValueError:
        return "tasks.txt"
    return "tasks.json"


def model_settings(
    *,
    model: str,
    model_api_base: str,
    model_api_key: str,
    model_routed: bool,
    judge_model: str,
    judge_api_base: str,
    judge_api_key: str,
    judge_routed: bool,
    run_key: str,
    router_base: str,
) -> dict[str, str]:
    """MODEL_* and JUDGE_* as the sandbox gets them: routed usage (covered, or an own key proxied)
    gets the router and the run's own key (an Anthropic model's ANTHROPIC_* too); otherwise the
    (resolved) base and the key given."""
    settings = {
        "MODEL": model,
        "MODEL_API_BASE": router_base if model_routed else model_api_base,
        "MODEL_API_KEY": run_key if model_routed else model_api_key,
        "JUDGE_MODEL": judge_model,
        "JUDGE_API_BASE": router_base if judge_routed else judge_api_base,
        "JUDGE_API_KEY": run_key if judge_routed else judge_api_key,
    }
    if model_routed and is_anthropic(model):
        settings["ANTHROPIC_BASE_URL"] = anthropic_base(router_base)
        settings["ANTHROPIC_API_KEY"] = run_key
    return settings


def sandbox_env(
    *,
    harness_env: dict,
    run_id: str,
    run_key: str,
    base_url: str,
    tasks: str,
    attempts: int,
    grading: str,
    model_settings: dict[str, str],
    fine_tuned: dict[str, str] | None = None,
) -> dict[str, str]:
    """The harness's env first, then the model settings given at launch; contract names win
    (a fine-tuned model's MODEL, ADAPTER_URL, MODEL_LABEL and HF_TOKEN among them)."""
    env = {k: str(v) for k, v in (harness_env or {}).items()}
    env.update({k: v for k, v in model_settings.items() if v})
    contract = {
        "BELVEDIR_API_KEY": run_key,
        "BELVEDIR_BASE_URL": base_url,
        "BELVEDIR_RUN_ID": run_id,
        "BELVEDIR_TASK_ATTEMPTS": str(attempts),
        "BELVEDIR_GRADING": grading,
        "FRACTAL_API_KEY": run_key,
        "FRACTAL_BASE_URL": base_url,
        "FRACTAL_RUN_ID": run_id,
    }
    if tasks:
        path = f"{CONTROL_DIR}/{tasks_filename(tasks)}"
        contract["BELVEDIR_TASKS_FILE"] = path
        contract["FRACTAL_TASKS_FILE"] = path
    contract.update(fine_tuned or {})
    env.update(contract)
    return env


@dataclass
class Outcome:
    succeeded: bool
    score: float | None = None
    results: dict | None = None
    notes: list[str] = field(default_factory=list)


class _NonFinite(float):
    """A NaN or Infinity literal in results.json, so the score check can name it."""


def _parse_constant(name: str):
    return _NonFinite(float(name.replace("Infinity", "inf")))


def _has_non_finite(value) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def _describe(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "Infinity"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _shown(number) -> str:
    text = str(number)
    return text if len(text) <= 30 else f"{text[:12]}…({len(text)} digits)"


def _non_finite_as_strings(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _non_finite_as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_non_finite_as_strings(v) for v in value]
    return value


def judge_results(raw: bytes | None, *, exit_code: int, launch_model: str) -> Outcome:
    """Apply the score rules to results.json after the run command exited."""
    notes: list[str] = []
    results = None
    if raw is not None:
        try:
            parsed = json.loads(raw.decode("utf-8"), parse_constant=_parse_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
            notes.append(f"belvedir: results.json is not valid JSON ({reason}).")
            parsed = None
        if parsed is not None and not isinstance(parsed, dict):
            notes.append("belvedir: results.json must hold a JSON object.")
            parsed = None
        results = parsed

    errored = errored_tasks(results)
    if errored and _nothing_ran(results, errored):
        notes.append(
            f"belvedir: every task errored ({len(errored)} of {len(errored)}) before it could "
            f"be scored, so the run has no score: {_errored_shown(errored)}"
        )
        return Outcome(False, None, results, notes)
    if errored:
        total = len(set(task_results(results)) | set(errored))
        notes.append(
            f"belvedir: {len(errored)} of {total} tasks errored and are not in the score: "
            f"{_errored_shown(errored)}"
        )

    limited = _tasks_limited(results)
    if limited:
        notes.append(limited)

    score = None
    if results is not None:
        raw_score = results.get("score")
        if "score" not in results:
            notes.append("belvedir: results.json has no top-level score.")
        elif (
            isinstance(raw_score, bool)
            or not isinstance(raw_score, int | float)
            or (isinstance(raw_score, float) and not math.isfinite(raw_score))
        ):
            notes.append(f"belvedir: the score must be a number, not {_describe(raw_score)}.")
        elif raw_score < 0:
            notes.append(f"belvedir: the score {_shown(raw_score)} is negative.")
        elif raw_score > 100:
            notes.append(f"belvedir: the score {_shown(raw_score)} is over 100.")
        elif raw_score > 1:
            score = raw_score / 100
            notes.append(f"belvedir: score {raw_score} read as a percentage: {score:g}.")
        else:
            score = float(raw_score)
        if _has_non_finite(results):
            notes.append(
                "belvedir: NaN and Infinity in results.json are not JSON; stored as strings."
            )
            results = _non_finite_as_strings(results)
    if results is not None:
        reported = results.get("model")
        if launch_model:
            if reported not in (None, "", launch_model):
                results["model_reported"] = reported
                notes.append(
                    f"belvedir: the harness reported model {reported!r}, but the run was launched with "
                    f"{launch_model!r}; kept as results.model_reported."
                )
            results["model"] = launch_model

    if exit_code != 0:
        return Outcome(False, None, results, notes)
    if raw is None:
        notes.append(
            "belvedir: the run command exited 0 but wrote no results.json at the repo root."
        )
    return Outcome(score is not None, score, results, notes)


def _tasks_limited(results) -> str:
    """ "ran N of M tasks" when results.json says a cap let in fewer tasks than the harness has
    (`n_tasks` of `n_tasks_total`, `task_limit` naming the cap); else ""."""
    if not isinstance(results, dict):
        return ""
    ran, total = results.get("n_tasks"), results.get("n_tasks_total")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (ran, total)):
        return ""
    if ran >= total:
        return ""
    limit = results.get("task_limit")
    why = f" ({str(limit)[:100]})" if isinstance(limit, str) and limit.strip() else ""
    return f"belvedir: ran {ran} of {total} tasks{why}."


def errored_tasks(results) -> dict[str, str]:
    """The tasks results.json lists under `errored` (task name → why): ones that never got a
    score because something around them failed (an image that did not build, a judge that
    could not be reached), kept out of the score rather than counted 0."""
    errored = results.get("errored") if isinstance(results, dict) else None
    if not isinstance(errored, dict):
        return {}
    return {str(name): str(reason or "no reason given")[:300] for name, reason in errored.items()}


def _nothing_ran(results: dict, errored: dict[str, str]) -> bool:
    """No task was scored: no score at all, or every per-task result is an errored one."""
    if results.get("score") is None:
        return True
    scored = task_results(results)
    return bool(scored) and set(scored) <= set(errored)


def _errored_shown(errored: dict[str, str]) -> str:
    named = [f"{name}: {reason}" for name, reason in list(errored.items())[:ERRORED_NAMED]]
    more = len(errored) - ERRORED_NAMED
    return "; ".join(named) + (f"; and {more} more" if more > 0 else "") + "."


def driver_note(log_text: str, driver: str | None) -> str:
    """The last line the served `driver` printed near the end of the log (why it stopped), as
    a `belvedir:` note; "" for another harness or when it printed none."""
    prefix = DRIVER_NOTE_PREFIXES.get(driver or "")
    if prefix is None:
        return ""
    for line in reversed(log_text.splitlines()[-DRIVER_NOTE_LINES:]):
        said = line[len(prefix) :].strip() if line.startswith(prefix) else ""
        if said:
            return f"belvedir: the {driver} driver said: {said[:500]}"
    return ""


# --- a run's env and secrets, assembled once -------------------------------------------


def run_model_secrets(run: Run) -> dict[str, str]:
    """The run's model key, judge key and run key, decrypted: for its sandbox only."""
    return {
        "model_api_key": crypto.decrypt(run.model_api_key_encrypted),
        "judge_api_key": crypto.decrypt(run.judge_api_key_encrypted),
        "run_key": crypto.decrypt(run.run_key_encrypted),
    }


def run_harness_env(run: Run) -> dict[str, str]:
    """The harness env the run was launched with, its secret values decrypted: sandbox only."""
    snapshot_env = (run.harness_snapshot or {}).get("env") or {}
    return env_secrets.env_plain(snapshot_env, run.harness_env_secrets_encrypted)


def run_secret_values(run: Run) -> list[str]:
    """Every secret the run's sandbox is given (keys, secret harness env, a fine-tuned model's
    signed adapter URL and Hugging Face token): what logs, results, notes and the run's spans
    are redacted of."""
    values = [
        *run_model_secrets(run).values(),
        *env_secrets.secret_values(run.harness_env_secrets_encrypted),
        *run_fine_tuned_secrets(run).values(),
    ]
    return [value for value in values if value]


def run_adapter_grant(run: Run) -> AdapterGrant | None:
    """What the run's ADAPTER_URL grants: its model's adapter, to this run, until the run's
    time cap ends (counted from its start); None before it started or without a model."""
    if run.fine_tuned_model_id is None or run.started_at is None:
        return None
    expires = int(run.started_at.timestamp()) + settings.BELVEDIR_RUN_TIMEOUT
    return AdapterGrant(run_id=run.pk, model_id=run.fine_tuned_model_id, expires=expires)


def run_fine_tuned_secrets(run: Run) -> dict[str, str]:
    """The signed adapter token (inside ADAPTER_URL) and the HF token a gated base gets."""
    grant = run_adapter_grant(run)
    if grant is None:
        return {}
    secrets = {"adapter_token": adapter_token(grant)}
    if run.fine_tuned_model.gated:
        secrets["hf_token"] = hf_token_value(organization=run.project.organization)
    return secrets


def run_fine_tuned_env(run: Run, *, base_url: str, masked: bool = False) -> dict[str, str]:
    """MODEL, ADAPTER_URL, MODEL_LABEL and (gated bases) HF_TOKEN, for the sandbox only
    (`masked`: the secret ones as MASKED, nothing signed or decrypted)."""
    grant = run_adapter_grant(run)
    if grant is None:
        return {}
    env = {
        "MODEL": run.model_base,
        "ADAPTER_URL": MASKED if masked else adapter_url(base_url, grant),
        "MODEL_LABEL": run.model,
    }
    if masked:
        token = MASKED if run.fine_tuned_model.gated else ""
    else:
        token = run_fine_tuned_secrets(run).get("hf_token")
    if token:
        env["HF_TOKEN"] = token
    return env


MASKED = "(set)"


def run_sandbox_env_names(run: Run) -> list[str]:
    """The names of the env the run's sandbox is given (run_sandbox_env's), for the run page:
    its values masked, no key decrypted and nothing signed (a key counts when one was stored)."""
    keys = ("model_api_key", "judge_api_key", "run_key")
    secrets = {key: MASKED if getattr(run, f"{key}_encrypted") else "" for key in keys}
    return sorted(run_sandbox_env(run, secrets=secrets, masked=True))


def run_sandbox_env(run: Run, *, secrets: dict[str, str], masked: bool = False) -> dict[str, str]:
    """Everything the run's sandbox is given as env (`secrets`: `run_model_secrets(run)`):
    the harness's env, the model settings, the contract names, a fine-tuned model's."""
    base_url = settings.BELVEDIR_SANDBOX_BASE_URL
    if masked:  # as pages show it: its secrets masked
        snapshot_env = (run.harness_snapshot or {}).get("env") or {}
        harness_env = env_secrets.env_masked(snapshot_env, run.harness_env_secrets_encrypted)
    else:
        harness_env = run_harness_env(run)
    return sandbox_env(
        harness_env=harness_env,
        run_id=run.pk,
        run_key=secrets["run_key"],
        base_url=base_url,
        tasks=(run.harness_snapshot or {}).get("tasks") or "",
        attempts=run.attempts,
        grading=run.grading,
        model_settings=model_settings(
            model=run.model_base or run.model,
            model_api_base=run.model_api_base_resolved or run.model_api_base,
            model_api_key=secrets["model_api_key"],
            model_routed=run.model_covered or run.model_proxied,
            judge_model=run.judge_model,
            judge_api_base=run.judge_api_base_resolved or run.judge_api_base,
            judge_api_key=secrets["judge_api_key"],
            judge_routed=run.judge_covered or run.judge_proxied,
            run_key=secrets["run_key"],
            router_base=router_base(base_url),
        ),
        fine_tuned=run_fine_tuned_env(run, base_url=base_url, masked=masked),
    )
