"""The managed Harbor workspace's rules (docs: Run with Harbor → Managed workspace or your own
Modal account; docs/task-sandboxes.md).

A Harbor harness (its repo is the platform's served Harbor driver, or it came from a Harbor
card) with `MODAL_TOKEN_ID` and `MODAL_TOKEN_SECRET` not both set runs its task containers in
the platform's managed workspace, so it must use the driver as shipped: the card's repo,
install and run commands, only the env the driver reads, a plain Harbor agent name,
`HARBOR_CONCURRENCY` 1 to 4, `HARBOR_N_TASKS` blank or 1 to 50, CPU compute; and its
organization must hold credits or have pay as you go on (`billing.services.may_start_credit_run`,
the one definition of that condition). With both Modal tokens set none of this applies: the
harness runs on the user's own Modal account as configured.

Every rule is checked when a harness is saved (`managed_refusal` with the organization: the
credits are refused with Invalid, like the other rules) and again at launch
(`managed_launch_check`: the credits are refused with PaymentRequired, 402); each refusal names
the variable or condition. A harness saved while the organization had credits is still refused
at launch once they run out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from belvedir.errors import Invalid, PaymentRequired
from billing import selectors as billing_selectors
from billing import services as billing
from billing.money import usd
from harnesses import catalog, drivers, env_secrets, tasks_format
from harnesses.models import Environment

MANAGED_ENV = (
    "MODEL",
    "MODEL_API_BASE",
    "MODEL_API_KEY",
    "MODEL_LABEL",
    "JUDGE_MODEL",
    "JUDGE_API_BASE",
    "JUDGE_API_KEY",
    "HARBOR_DATASET",
    "HARBOR_AGENT",
    "HARBOR_N_TASKS",
    "HARBOR_CONCURRENCY",
    "HARBOR_TASK_NAMES",
    "HARBOR_MODEL",
    "MODAL_TOKEN_ID",
    "MODAL_TOKEN_SECRET",
    "BELVEDIR_AGENT_URL",
    "BELVEDIR_AGENT_TOKEN",
    "OPENROUTER_API_KEY",
)
MAX_CONCURRENCY = 4
MAX_N_TASKS = 50
# A Harbor agent's registered name (terminus-2, claude-code, oracle, belvedir), never an
# import path (module.path:Class), which would load code the managed workspace did not ship.
_PLAIN_AGENT = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_HARBOR_CARDS = {p.slug for p in catalog.PRESETS if p.repo == catalog.HARBOR_REPO}
_OWN_MODAL = "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET to run it on your own Modal account instead"


def is_harbor(*, repo_url: str, preset: str = "") -> bool:
    """Whether a harness runs the Harbor driver: the served one, or a Harbor card's."""
    return drivers.served_name(repo_url) == catalog.HARBOR_REPO or preset in _HARBOR_CARDS


# Harbor agents that call no model: `oracle` writes each task's recorded solution, `nop` does
# nothing. A run of one needs no model key; its MODEL only tags the run (charts, Models panel).
NO_MODEL_AGENTS = ("oracle", "nop")


def calls_no_model(*, repo_url: str, preset: str, env: Mapping[str, str]) -> bool:
    """Whether a Harbor harness's agent (HARBOR_AGENT) calls no model."""
    agent = str(env.get("HARBOR_AGENT") or "").strip()
    return is_harbor(repo_url=repo_url, preset=preset) and agent in NO_MODEL_AGENTS


_SUITE_CARDS = {p.slug: p for p in catalog.PRESETS if p.group == catalog.SUITES}


def harbor_tasks_refusal(*, repo_url: str, preset: str, env: Mapping[str, str], tasks: str) -> None:
    """A Harbor harness's Tasks field, at save: the tasks it runs (exported as a Harbor
    dataset at launch) when it has no HARBOR_DATASET. Invalid naming the field when a suite
    card (which brings its own tasks) has one, when HARBOR_DATASET names other tasks too, or
    when it is not a valid task list (harnesses.tasks_format)."""
    if not (tasks or "").strip() or not is_harbor(repo_url=repo_url, preset=preset):
        return
    dataset = str(env.get("HARBOR_DATASET") or "").strip()
    if preset in _SUITE_CARDS:
        raise Invalid(
            f"The {_SUITE_CARDS[preset].name} card brings its own tasks (HARBOR_DATASET "
            f"{dataset or _SUITE_CARDS[preset].env['HARBOR_DATASET']}), so its Tasks field "
            "must stay blank; for a task list of your own pick Belvedir Runner on Harbor or an "
            "agent scaffold card.",
            field="tasks",
            code="harbor_tasks",
        )
    if dataset:
        raise Invalid(
            f"Both HARBOR_DATASET ({dataset}) and the Tasks field say which tasks to run: keep "
            "one (HARBOR_DATASET for a Harbor dataset, the Tasks field for your task list).",
            field="tasks",
            code="harbor_tasks",
        )
    tasks_format.parse_tasks(tasks)


def uses_own_modal(env: Mapping[str, str]) -> bool:
    """Both Modal tokens set: the task containers run on the user's Modal account."""
    return bool(str(env.get("MODAL_TOKEN_ID") or "").strip()) and bool(
        str(env.get("MODAL_TOKEN_SECRET") or "").strip()
    )


def is_managed(*, repo_url: str, preset: str, env: Mapping[str, str]) -> bool:
    """A Harbor harness whose task containers run in the managed workspace."""
    return is_harbor(repo_url=repo_url, preset=preset) and not uses_own_modal(env)


def _whole_number(env: Mapping[str, str], key: str, low: int, high: int, blank_ok: bool) -> None:
    value = str(env.get(key) or "").strip()
    if not value and blank_ok:
        return
    if not value.isdigit() or not low <= int(value) <= high:
        shown = f"{value!r}" if value else "blank"
        raise Invalid(
            f"env key {key} must be {'blank or ' if blank_ok else ''}a whole number from {low} "
            f"to {high} in Belvedir's managed Harbor workspace (it is {shown}); {_OWN_MODAL}.",
            field="env",
            code="managed_env",
        )


def _tasks_to_run(*, env: Mapping[str, str], tasks: str, organization_id) -> tuple[int, str]:
    """How many tasks a managed run with no HARBOR_N_TASKS would run, and what holds them: the
    environment HARBOR_DATASET names (belvedir:<id>, its current version, in the harness's
    organization), else with no dataset the Tasks field's; (0, "") when not known here (a
    registry suite, a directory)."""
    if str(env.get("HARBOR_TASK_NAMES") or "").strip():
        return 0, ""  # the tasks named run, each one named by the user
    dataset = str(env.get("HARBOR_DATASET") or "").strip()
    if dataset.startswith("belvedir:"):
        found = Environment.objects.filter(
            pk=dataset.removeprefix("belvedir:").strip(), project__organization_id=organization_id
        ).first()
        return (found.task_count, f"the environment {found.name}") if found else (0, "")
    if not dataset and (tasks or "").strip():
        try:
            return len(tasks_format.parse_tasks(tasks)), "its Tasks field"
        except Invalid:
            return 0, ""  # the Tasks field's own check names what is wrong with it
    return 0, ""


def _task_count_check(*, env: Mapping[str, str], tasks: str, organization_id) -> None:
    if str(env.get("HARBOR_N_TASKS") or "").strip():
        return  # capped by the user, 1 to 50 (_whole_number)
    count, holder = _tasks_to_run(env=env, tasks=tasks, organization_id=organization_id)
    if count > MAX_N_TASKS:
        raise Invalid(
            f"The harness would run {count} tasks ({holder}), and Belvedir's managed Harbor "
            f"workspace runs at most {MAX_N_TASKS} in a run: set HARBOR_N_TASKS (1 to "
            f"{MAX_N_TASKS}) or HARBOR_TASK_NAMES to run some of them, or split the tasks; "
            f"{_OWN_MODAL}.",
            field="env",
            code="managed_task_count",
        )


def managed_refusal(
    *,
    repo_url: str,
    install_command: str,
    run_command: str,
    env: Mapping[str, str],
    compute: str,
    preset: str = "",
    organization=None,
    tasks: str = "",
    organization_id=None,
) -> None:
    """Raise Invalid naming the first broken rule when the harness is a managed Harbor
    harness that is not the driver as shipped, or (with `organization`) whose organization
    holds no credits and has pay as you go off; nothing for other harnesses.

    `env` is the whole env, secrets included (their values are only tested for blankness).
    `organization` None: the credits are not checked (the launch checks them itself).
    `tasks` (the Tasks field) and the environment a `belvedir:<id>` dataset names (looked up in
    `organization`'s, else `organization_id`'s environments) count the tasks a run without
    HARBOR_N_TASKS would run: past MAX_N_TASKS the save is refused, naming both numbers."""
    if not is_managed(repo_url=repo_url, preset=preset, env=env):
        return
    shipped = drivers.served_url(catalog.HARBOR_REPO)
    where = "in Belvedir's managed Harbor workspace"
    if drivers.served_name(repo_url) != catalog.HARBOR_REPO:
        raise Invalid(
            f"repo_url must be the platform's Harbor driver ({shipped}) {where}; {_OWN_MODAL}.",
            field="repo_url",
            code="managed_repo",
        )
    for field, value, expected in [
        ("install_command", install_command, catalog.HARBOR_INSTALL),
        ("run_command", run_command, catalog.HARBOR_RUN),
    ]:
        if (value or "").strip() != expected:
            raise Invalid(
                f"{field} must stay the driver's own ({expected!r}) {where}; {_OWN_MODAL}.",
                field=field,
                code="managed_command",
            )
    for key in env:
        if key not in MANAGED_ENV:
            raise Invalid(
                f"env key {key} is not one the Harbor driver reads, so it cannot be set {where} "
                f"(allowed: {', '.join(MANAGED_ENV)}); {_OWN_MODAL}.",
                field="env",
                code="managed_env",
            )
    agent = str(env.get("HARBOR_AGENT") or "").strip()
    if agent and not _PLAIN_AGENT.match(agent):
        raise Invalid(
            f"env key HARBOR_AGENT must be a plain Harbor agent name (terminus-2, claude-code, "
            f"belvedir), not {agent!r}, {where}; {_OWN_MODAL}.",
            field="env",
            code="managed_env",
        )
    _whole_number(env, "HARBOR_CONCURRENCY", 1, MAX_CONCURRENCY, blank_ok=True)
    _whole_number(env, "HARBOR_N_TASKS", 1, MAX_N_TASKS, blank_ok=True)
    _task_count_check(
        env=env,
        tasks=tasks,
        organization_id=organization.pk if organization is not None else organization_id,
    )
    if compute != "cpu":
        raise Invalid(
            f"compute must be CPU {where}; {_OWN_MODAL}.", field="compute", code="managed_compute"
        )
    if organization is not None:
        refusal = credits_refusal(organization=organization)
        if refusal:
            raise Invalid(refusal, code="managed_credits")


def credits_refusal(*, organization) -> str:
    """Why the organization may not use the managed workspace, naming the condition and its
    fix; "" when it may. The condition is `billing.services.may_start_credit_run`'s: it holds
    credits, or pay as you go is on and this month is within its limit."""
    if billing.may_start_credit_run(organization=organization):
        return ""
    balance = usd(billing_selectors.balance(organization=organization))
    account = billing_selectors.account_for(organization=organization)
    if account.pay_as_you_go:
        state = (
            f"pay as you go has reached its monthly limit of {usd(account.monthly_limit_micros)}"
        )
        fix = "Add credits or redeem a coupon, or have an owner raise the monthly limit"
    else:
        state = "pay as you go is off"
        fix = "Add credits or redeem a coupon, or have an owner turn on pay as you go"
    return (
        f"Belvedir's managed Harbor workspace needs credits or pay as you go: the organization "
        f"has no credits (its balance is {balance}) and {state}. {fix}, under Organization "
        f"Settings → Billing; or {_OWN_MODAL}."
    )


def concurrency(env: Mapping[str, str]) -> int:
    """How many task sandboxes a managed run may have at once: HARBOR_CONCURRENCY, else 4."""
    value = str(env.get("HARBOR_CONCURRENCY") or "").strip()
    return min(int(value), MAX_CONCURRENCY) if value.isdigit() and int(value) >= 1 else 4


def managed_launch_check(*, harness, organization) -> None:
    """At launch: the shape rules once more (the harness may predate them), then the
    organization's credits once more (PaymentRequired naming the balance: they may have run
    out since the harness was saved)."""
    env = env_secrets.env_plain(harness.env or {}, harness.env_secrets_encrypted)
    if not is_managed(repo_url=harness.repo_url, preset=harness.preset, env=env):
        return
    try:
        managed_refusal(
            repo_url=harness.repo_url,
            install_command=harness.install_command,
            run_command=harness.run_command,
            env=env,
            compute=harness.compute,
            preset=harness.preset,
            tasks=harness.tasks,
            organization_id=organization.pk,
        )
    except Invalid as exc:
        raise Invalid(
            f"The harness {harness.name} breaks a managed-workspace rule: {exc.message} "
            "Edit the harness.",
            field="harness",
            code=exc.code,
        ) from None
    refusal = credits_refusal(organization=organization)
    if refusal:
        raise PaymentRequired(refusal, code="managed_credits")
