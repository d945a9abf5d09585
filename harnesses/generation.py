"""Generating an environment's tasks from a description with a model, as a background job.

`generation_start` checks the model access and queues the job (the housekeeping cluster);
`generation_execute` (the job) asks the model for the tasks, checks them with
harnesses.tasks_format (once more with the errors if the first answer is not valid), and
keeps them as a preview; `generation_save` turns the preview, edited or not, into an
environment, and a harness from the card picked at the start.

Model access: a key the user gives (with a base, or the provider inferred from the model id),
a base of their own without a key, or, with neither, a model the platform covers: called at
the operator's upstream (the router's, BELVEDIR_ROUTER_UPSTREAM_BASE) with the operator's key,
metered like a covered run's calls: each request's worst case reserved against the
generation's own cap (BELVEDIR_COVERED_SPEND_CAP_USD, a covered run's) by billing.spend before
it is sent, settled with the usage the upstream reported (never past its reservation).
"""

import json
import re
import time

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from belvedir import crypto, pinned
from belvedir.errors import Invalid
from belvedir.models import Project
from belvedir.net_policy import model_base_refusal
from belvedir.text import usd
from billing.pricing import (
    Price,
    catalog_price,
    chat_usage,
    usage_cost_micros,
    worst_case_micros,
)
from billing.spend import Charge, spend_reserve, spend_settle
from harnesses import environments, model_client, policy, tasks_format
from harnesses.models import Environment, EnvironmentGeneration, Harness
from models_registry.inference import is_anthropic, resolve_api_base
from models_registry.selectors import covered_model, lab_for_model

Status = EnvironmentGeneration.Status
TASK_FUNC = "harnesses.jobs.generate_environment"
MAX_TASKS = 50
NAME_MAX_CHARS = EnvironmentGeneration._meta.get_field("name").max_length
ATTEMPTS = 2  # the first answer, and one more with its errors if it was not valid


def _check_covered(project: Project, model: str) -> None:
    entry = covered_model(model)
    if entry is None or not settings.BELVEDIR_ROUTER_UPSTREAM_KEY:
        why = (
            "is not one of the models Belvedir covers"
            if settings.BELVEDIR_ROUTER_UPSTREAM_KEY
            else "cannot be covered: this platform covers no model usage"
        )
        raise Invalid(
            f"The model {model} {why}, so its key cannot be left blank: set model_api_key "
            "(and model_api_base for a provider other than OpenRouter).",
            field="model_api_key",
            code="model_not_covered",
        )
    lab = entry.lab if entry.lab.is_chinese else lab_for_model(model)
    if lab is not None and lab.is_chinese and not project.chinese_models_allowed:
        raise Invalid(
            f"{model} is a model of {lab.name}, a Chinese lab, and the project {project.name} "
            "does not allow Chinese models for covered usage: an owner or admin can turn on "
            "“Chinese models” in Project settings, or give a key of your own.",
            field="model",
            code="chinese_models",
        )


@transaction.atomic
def generation_start(
    *,
    project: Project,
    description: str,
    model: str,
    name: str = "",
    count: int = 5,
    model_api_base: str = "",
    model_api_key: str = "",
    preset: str = "",
    created_by=None,
) -> EnvironmentGeneration:
    """Check the request and the model access, and queue the job."""
    description = environments.clean_description(description)
    if not description:
        raise Invalid("description is required: what the tasks should test.", field="description")
    name = policy.validate_name(name, max_chars=NAME_MAX_CHARS, required=False)
    model = (model or "").strip()
    if not model or len(model) > 200 or any(c.isspace() for c in model):
        raise Invalid("model is required: a model id such as openai/gpt-4.1-mini.", field="model")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_TASKS:
        raise Invalid(f"count must be a number of tasks from 1 to {MAX_TASKS}.", field="count")
    preset = (preset or "").strip()
    if preset:
        environments.backing_preset(preset)
    api_base, api_key = (model_api_base or "").strip(), (model_api_key or "").strip()
    if api_base and not re.match(r"^https?://[^\s/]+", api_base):
        raise Invalid("model_api_base must be an http(s) URL.", field="model_api_base")
    covered = not api_key and not api_base
    if covered:
        _check_covered(project, model)
    else:
        api_base = resolve_api_base(model=model, api_base=api_base, gpu=False)
        if (refusal := model_base_refusal(api_base)) is not None:
            raise Invalid(f"model_api_base is refused: {refusal}.", field="model_api_base")
    generation = EnvironmentGeneration.objects.create(
        project=project,
        name=name,
        description=description,
        count=count,
        model=model,
        api_base=api_base,
        api_key_encrypted=crypto.encrypt(api_key) if api_key else "",
        covered=covered,
        covered_cap_micros=settings.BELVEDIR_COVERED_SPEND_CAP_MICROS if covered else 0,
        preset=preset,
        progress="Queued.",
        created_by=created_by,
    )
    transaction.on_commit(lambda: _enqueue(generation.pk))
    return generation


def _enqueue(generation_id: str) -> None:
    from django_q.tasks import async_task

    async_task(
        TASK_FUNC,
        generation_id,
        task_name=f"generate {generation_id}",
        group="environments",
        cluster=settings.Q_HOUSEKEEPING_CLUSTER,
    )


def _kinds(preset: str) -> tuple[str, ...]:
    """Verifier kinds to ask for: the one-sandbox Runner grades judge and rubric tasks only."""
    if preset == "runner":
        return ("judge", "rubric")
    return ("judge", "rubric", "code")


def prompt_messages(generation: EnvironmentGeneration) -> list[dict]:
    kinds = _kinds(generation.preset)
    shapes = {
        "judge": '{"kind": "judge"} (an LLM judge compares the answer to the recorded one)',
        "rubric": '{"kind": "rubric", "criteria": ["...", "..."]} (the judge checks each)',
        "code": '{"kind": "code", "source": "def verify(answer, state):\\n    return ..."} '
        "(Python returning True or a score from 0 to 1; only when an exact check fits)",
    }
    system = (
        "You write evaluation tasks for AI agents. Answer with a JSON list only, no prose. "
        'Each task is an object: {"id": a short slug of letters, digits and "-", '
        '"prompt": the task as the agent reads it, "answer": the ideal answer, '
        '"verifier": one of ' + "; ".join(shapes[k] for k in kinds) + "}. "
        "Ids are unique. Prompts stand alone."
    )
    user = f"Write {generation.count} tasks for this environment:\n\n{generation.description}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def tasks_from_answer(text: str) -> list[dict]:
    """The tasks in a model's answer: a JSON list (or {"tasks": [...]}) in the text, code
    fences allowed; keys other than a task's go to its metadata. Invalid names what is wrong."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("["), body.find("{")) if i >= 0]
    if not starts:
        raise Invalid("The answer holds no JSON list of tasks.", field="tasks")
    try:
        document, _ = json.JSONDecoder().raw_decode(body[min(starts) :])
    except ValueError as exc:
        raise Invalid(f"The answer is not valid JSON: {exc}.", field="tasks") from None
    if isinstance(document, dict) and isinstance(document.get("tasks"), list):
        document = document["tasks"]
    if isinstance(document, list):
        document = [_metadata_folded(item) for item in document]
    return tasks_format.validate_tasks(document)


def _metadata_folded(item):
    if not isinstance(item, dict):
        return item
    extra = {k: v for k, v in item.items() if k not in tasks_format.TASK_KEYS}
    if not extra:
        return item
    task = {k: v for k, v in item.items() if k in tasks_format.TASK_KEYS}
    metadata = task.get("metadata") if isinstance(task.get("metadata"), dict) else {}
    task["metadata"] = {**metadata, **extra}
    return task


def _progress(generation_id: str, text: str) -> None:
    EnvironmentGeneration.objects.filter(pk=generation_id).update(progress=text[:200])


def _finish(generation_id: str, **fields) -> None:
    EnvironmentGeneration.objects.filter(pk=generation_id).update(
        finished_at=timezone.now(), **fields
    )


STALE_MARGIN = 60  # seconds past BELVEDIR_GENERATION_TIMEOUT before a running job is lost
QUEUED_NOTE_AFTER = 30  # seconds queued before the progress says what it waits for


def generation_check_stale(*, generation: EnvironmentGeneration) -> EnvironmentGeneration:
    """A generation as it should be read: one whose job stopped without finishing (a worker
    killed or restarted) is failed, so none stays "running" forever; one still queued after a
    while says what it waits for. Conditional updates: safe beside the job itself."""
    now = timezone.now()
    started = generation.started_at or generation.created_at
    if generation.status == Status.RUNNING and (now - started).total_seconds() > (
        settings.BELVEDIR_GENERATION_TIMEOUT + STALE_MARGIN
    ):
        EnvironmentGeneration.objects.filter(pk=generation.pk, status=Status.RUNNING).update(
            status=Status.FAILED,
            error="The generation job stopped before it finished (its worker was stopped?); "
            "generate again.",
            progress="Failed.",
            finished_at=now,
        )
    elif (
        generation.status == Status.QUEUED
        and (now - generation.created_at).total_seconds() > QUEUED_NOTE_AFTER
    ):
        EnvironmentGeneration.objects.filter(pk=generation.pk, status=Status.QUEUED).update(
            progress="Queued: waiting for a worker of the housekeeping cluster "
            "(Q_CLUSTER_NAME=housekeeping manage.py qcluster)."
        )
    else:
        return generation
    return EnvironmentGeneration.objects.get(pk=generation.pk)


class _CoveredSpend:
    """A covered generation's meter (`model_client.Meter`): each request's worst case reserved
    against the generation's cap before it is sent, settled after it with the upstream's
    reported usage (billing.spend charges at most the reservation)."""

    def __init__(self, generation: EnvironmentGeneration, price: Price) -> None:
        self.generation, self.price, self.reserved = generation, price, 0

    def reserve(self, body: dict) -> None:
        amount = worst_case_micros(self.price, body)
        if not spend_reserve(
            account=EnvironmentGeneration, account_id=self.generation.pk, amount=amount
        ):
            generation = EnvironmentGeneration.objects.get(pk=self.generation.pk)
            raise model_client.ModelError(
                f"The generation's covered spend cap of {usd(generation.covered_cap_micros)} "
                f"is reached (spent {usd(generation.covered_spent_micros)}; the next call may "
                f"cost up to {usd(amount)})."
            )
        self.reserved = amount

    def settle(self, body: dict, usage: dict | None, *, sent: bool) -> None:
        reported = chat_usage(usage)
        if reported is None:  # none reported: the worst case, once the request reached it
            cost = self.reserved if sent else 0
        else:
            cost = usage_cost_micros(self.price, reported)
        charge = Charge(self.generation.pk, self.reserved, cost)
        spend_settle(account=EnvironmentGeneration, charges=[charge])
        self.reserved = 0


def _covered_access(generation: EnvironmentGeneration):
    """A covered generation's upstream, key, output limit and meter; ModelError when its model
    is no longer one the platform covers."""
    entry = covered_model(generation.model)
    if entry is None:
        raise model_client.ModelError(
            f"The model {generation.model} is no longer one the platform covers."
        )
    price = catalog_price(entry, anthropic=is_anthropic(entry.model_id))
    limit = min(settings.BELVEDIR_GENERATION_MAX_TOKENS, entry.max_output_tokens)
    return (
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE,
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY,
        limit,
        _CoveredSpend(generation, price),
    )


def generation_execute(*, generation_id: str) -> str:
    """The job: claim a queued generation, ask the model, keep the tasks or the error.
    Safe to run twice: only the first claims it."""
    claimed = EnvironmentGeneration.objects.filter(pk=generation_id, status=Status.QUEUED).update(
        status=Status.RUNNING, progress="Starting.", started_at=timezone.now()
    )
    if not claimed:
        return "not queued"
    generation = EnvironmentGeneration.objects.get(pk=generation_id)
    meter, limit = None, settings.BELVEDIR_GENERATION_MAX_TOKENS
    if generation.covered:
        try:
            api_base, api_key, limit, meter = _covered_access(generation)
        except model_client.ModelError as exc:
            _finish(generation_id, status=Status.FAILED, error=str(exc), progress="Failed.")
            return "failed"
    else:
        api_base = generation.api_base
        # Checked again where it is called (the name may point elsewhere by now), and on
        # each connection (`pinned`).
        if (refusal := model_base_refusal(api_base)) is not None:
            error = f"The model base {api_base} is refused: {refusal}."
            _finish(generation_id, status=Status.FAILED, error=error, progress="Failed.")
            return "failed"
        api_key = (
            crypto.decrypt(generation.api_key_encrypted) if generation.api_key_encrypted else ""
        )
    if generation.covered:  # the operator's upstream
        return _generate(generation, api_base, api_key, limit, meter, None)
    # A base the user named: every connection pinned to an address the policy checked (its
    # name may resolve elsewhere since the check above), no redirects.
    with pinned.sync_client(timeout=60.0) as client:
        return _generate(generation, api_base, api_key, limit, meter, client)


def _generate(
    generation: EnvironmentGeneration,
    api_base: str,
    api_key: str,
    limit: int,
    meter: model_client.Meter | None,
    client: httpx.Client | None,
) -> str:
    """Ask the model (once more with the errors of an answer that is not valid tasks) and
    keep the tasks or the error."""
    generation_id = generation.pk
    messages = prompt_messages(generation)
    deadline = time.monotonic() + settings.BELVEDIR_GENERATION_TIMEOUT
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        _progress(
            generation_id,
            f"Asking {generation.model} for {generation.count} tasks"
            + (" again, with the errors of its first answer" if attempt > 1 else "")
            + "…",
        )
        try:
            answer = model_client.chat(
                api_base=api_base,
                api_key=api_key,
                model=generation.model,
                messages=messages,
                deadline=deadline,
                max_tokens=limit,
                meter=meter,
                client=client,
            )
        except model_client.ModelError as exc:
            error = str(exc)
            break
        _progress(generation_id, "Checking the tasks…")
        try:
            tasks = tasks_from_answer(answer)
        except Invalid as exc:
            error = f"The model's tasks were not valid: {exc.message}"
            messages = [
                *messages,
                {"role": "assistant", "content": answer},
                {
                    "role": "user",
                    "content": f"{exc.message} Answer again with the whole corrected JSON list.",
                },
            ]
            continue
        _finish(
            generation_id,
            status=Status.SUCCEEDED,
            tasks=tasks,
            error="",
            progress=f"{len(tasks)} tasks ready to review.",
        )
        return "succeeded"
    _finish(generation_id, status=Status.FAILED, error=error, progress="Failed.")
    return "failed"


@transaction.atomic
def generation_save(
    *,
    generation: EnvironmentGeneration,
    name: str | None = None,
    description: str | None = None,
    tasks: list | str | None = None,
    preset: str | None = None,
    created_by=None,
) -> tuple[Environment, Harness | None]:
    """The previewed tasks (or the user's edit of them) as a new environment, and a harness
    from the card picked (`preset`, else the one given at the start; blank: none)."""
    generation = EnvironmentGeneration.objects.select_for_update().get(pk=generation.pk)
    if generation.status != Status.SUCCEEDED:
        raise Invalid(
            f"This generation is {generation.get_status_display().lower()}: there are no tasks "
            "to save.",
            field="generation",
        )
    if generation.environment_id:
        raise Invalid("These tasks are already saved as an environment.", field="generation")
    environment = environments.environment_create(
        project=generation.project,
        name=name if name is not None else generation.name,
        description=description if description is not None else generation.description,
        tasks=tasks if tasks is not None else generation.tasks,
        created_by=created_by,
    )
    generation.environment = environment
    generation.save(update_fields=["environment"])
    card = generation.preset if preset is None else preset.strip()
    harness = None
    if card:
        harness = environments.environment_harness_create(
            environment=environment, preset=card, created_by=created_by
        )
    return environment, harness
