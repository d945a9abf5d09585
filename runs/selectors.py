"""Run reads. Lists take the project (views pass `access.project`)."""

from django.db.models import CharField, Q, QuerySet, Value
from django.urls import reverse

from belvedir.models import ApiKey, Project
from harnesses import env_secrets, managed
from models_registry.models import FineTunedModel
from runs import contract, gpu
from runs.models import IN_FLIGHT, Run, Status


def run_of_key(key: ApiKey) -> Run | None:
    """The run a per-run key belongs to; None for a project key."""
    if key.kind != ApiKey.Kind.RUN:
        return None
    return Run.objects.filter(ingest_key=key).first()


def run_is_managed(run: Run) -> bool:
    """Whether the run is a managed Harbor run (its task sandboxes are harbor's: the run page
    pulls harbor's partial in for it)."""
    snap = run.harness_snapshot or {}
    return managed.is_managed(
        repo_url=snap.get("repo_url", ""),
        preset=snap.get("preset", ""),
        env=contract.run_harness_env(run),
    )


def run_secret_values(run: Run) -> list[str]:
    """Every secret the run's sandbox is given, what the run's spans are redacted of
    (assembled once in runs/contract.py)."""
    return contract.run_secret_values(run)


def run_covered_models(run: Run) -> frozenset[str]:
    """The models whose calls the platform pays for in this run (what the router lets its key
    call): its model when the model is covered, its judge when the judge is, each as the
    sandbox gets it (the launch's value, else the harness env's)."""
    names = set()
    if run.model_covered:
        names.add(run.model_base or run.model)
    if run.judge_covered:
        env = (run.harness_snapshot or {}).get("env") or {}
        if not run.judge_model and "JUDGE_MODEL" not in env:
            env = env_secrets.env_plain(env, run.harness_env_secrets_encrypted)
        names.add(run.judge_model or str(env.get("JUDGE_MODEL") or ""))
    return frozenset(name.strip() for name in names if name.strip())


ENVIRONMENT_DATASET = "belvedir:"  # HARBOR_DATASET=belvedir:<environment id> (the Harbor driver)


def run_environment_ids(run: Run) -> set[str]:
    """The environments a run's key may export: the one its harness named at launch in
    `HARBOR_DATASET=belvedir:<id>`, and the one its harness was made from (if it still
    exists). Its project's others are not the run's business."""
    env = (run.harness_snapshot or {}).get("env") or {}
    dataset = str(env.get("HARBOR_DATASET") or "").strip()
    ids = set()
    if dataset.startswith(ENVIRONMENT_DATASET):
        ids.add(dataset[len(ENVIRONMENT_DATASET) :].strip())
    if run.harness_id is not None:
        ids.add(run.harness.environment_id)
    ids.discard("")
    ids.discard(None)
    return ids


def runs_for(
    *,
    project: Project,
    harness: str | None = None,
    status: str | None = None,
    model: str | None = None,
) -> QuerySet[Run]:
    """The project's runs, newest first, optionally of one harness, status or model."""
    runs = Run.objects.filter(project=project)
    if harness:
        runs = runs.filter(harness_id=harness)
    if status and status in Status.values:
        runs = runs.filter(status=status)
    if model:
        runs = _of_model(runs, project=project, model=model)
    return runs


def _of_model(runs: QuerySet[Run], *, project: Project, model: str) -> QuerySet[Run]:
    """Runs of `model`: a model id as launched, or the id of one of the project's fine-tuned
    models (the runs attributed to it)."""
    fine_tuned = FineTunedModel.objects.filter(project=project, pk=model).first()
    if fine_tuned is None:
        return runs.filter(model=model)
    return runs.filter(_attributed_to(fine_tuned))


def _attributed_to(fine_tuned: FineTunedModel) -> Q:
    return Q(fine_tuned_model=fine_tuned) | Q(results__model=fine_tuned.name)


def runs_of_fine_tuned_model(fine_tuned: FineTunedModel) -> QuerySet[Run]:
    """The runs attributed to a fine-tuned model, newest first: launched against it from the
    Models page, or any run of its project whose results.model is its name."""
    return Run.objects.filter(project_id=fine_tuned.project_id).filter(_attributed_to(fine_tuned))


def latest_scores_by_model(*, project: Project, models) -> dict[str, list[Run]]:
    """Each fine-tuned model's latest scored run per harness (newest first), by model id.

    One query for all the models: a UNION ALL of each model's newest 200 scored runs.
    """
    models = list(models)
    parts = [
        runs_of_fine_tuned_model(fine_tuned)
        .filter(score__isnull=False)
        .exclude(finished_at=None)
        .annotate(for_model=Value(fine_tuned.pk, output_field=CharField()))
        .order_by("-finished_at")[:200]
        for fine_tuned in models
    ]
    rows = list(parts[0].union(*parts[1:], all=True)) if parts else []
    rows.sort(key=lambda run: run.finished_at, reverse=True)  # a union keeps no order
    seen: dict[str, dict[str, Run]] = {fine_tuned.pk: {} for fine_tuned in models}
    for run in rows:
        seen[run.for_model].setdefault(run.harness_name, run)
    return {pk: list(by_harness.values()) for pk, by_harness in seen.items()}


def log_since(run: Run, offset: int) -> dict:
    start = run.log_size - len(run.log_tail)
    text = run.log_tail[max(0, offset - start) :] if offset < run.log_size else ""
    return {"text": text, "offset": run.log_size, "status": run.status, "truncated": offset < start}


def queue_position(run: Run) -> int | None:
    """A queued run's place in its queue (1: next to start), else None.

    Runs start in the order they were enqueued, as run workers (Q_WORKERS) come free. CPU runs
    share one queue; GPU runs wait in their GPU type's queue for a worker with a free device
    of that type, and count only the runs of that type ahead of them.
    """
    if run.status != Status.QUEUED:
        return None
    if run.enqueued_at is None:
        return 1
    ahead = Run.objects.filter(status=Status.QUEUED, gpu_type=run.gpu_type).filter(
        Q(enqueued_at__lt=run.enqueued_at) | Q(enqueued_at=run.enqueued_at, pk__lt=run.pk)
    )
    return ahead.count() + 1


def waiting_for(run: Run) -> str:
    """What a queued GPU run waits for ("waiting for an A10G worker"); "" otherwise."""
    if run.status != Status.QUEUED or not run.gpu_type:
        return ""
    return gpu.waiting_for(run.gpu_type)


SERIES_RUNS = 300  # the newest scored runs a chart draws
SERIES_FIELDS = (
    "id",
    "harness_name",
    "model",
    "score",
    "score_stderr",
    "score_ci_low",
    "score_ci_high",
    "finished_at",
)


def score_series(
    *, project: Project, harness: str | None = None, model: str | None = None
) -> list[dict]:
    """Scored runs over time, one series per model (per harness and model when `harness` is
    not given), oldest point first, each series with its run count, best run and latest run;
    each run with its page's link as `detail_url`."""
    runs = Run.objects.filter(project=project, score__isnull=False).exclude(finished_at=None)
    if harness:
        runs = runs.filter(harness_id=harness)
    if model:
        runs = _of_model(runs, project=project, model=model)
    # Only what the chart draws: not each run's results, log tail and harness snapshot.
    newest = runs.order_by("-finished_at", "-pk").only(*SERIES_FIELDS)[:SERIES_RUNS]
    series: dict[tuple, dict] = {}
    # One reverse() for all the points (their links differ only in the run id): the chart's
    # table links each of them, which with {% url %} per row was most of the page's time.
    url = reverse("runs:detail", kwargs={"run_id": "RUN_ID"})
    for run in reversed(newest):
        run.detail_url = url.replace("RUN_ID", run.pk)
        key = (run.model,) if harness else (run.harness_name, run.model)
        label = " · ".join(part or "(no model)" for part in key)
        entry = series.setdefault(key, {"label": label, "runs": [], "best": run})
        entry["runs"].append(run)
        if run.score > entry["best"].score:
            entry["best"] = run
    for entry in series.values():
        entry["latest"] = entry["runs"][-1]
    return sorted(series.values(), key=lambda entry: entry["label"])


def score_chart_data(series: list[dict]) -> dict:
    """The series as the score chart script reads them (passed with `json_script`)."""
    return {
        "series": [
            {
                "label": entry["label"],
                "points": [
                    {
                        "x": int(run.finished_at.timestamp() * 1000),
                        "y": run.score,
                        "run": run.pk,
                        "url": run.detail_url,
                        # the 95% interval, drawn as an error bar (null without one)
                        "low": run.score_ci_low if run.score_stderr is not None else None,
                        "high": run.score_ci_high if run.score_stderr is not None else None,
                        "stderr": run.score_stderr,
                    }
                    for run in entry["runs"]
                ],
            }
            for entry in series
        ]
    }


def dashboard_for(*, project: Project, limit: int = 5) -> dict:
    """The project dashboard: runs in flight, the latest scores, the recent failures."""
    runs = Run.objects.filter(project=project)
    return {
        "in_flight": runs.filter(status__in=IN_FLIGHT).order_by("created_at")[:limit],
        "latest_scores": runs.filter(status=Status.SUCCEEDED, score__isnull=False).order_by(
            "-finished_at", "-created_at"
        )[:limit],
        "recent_failures": runs.filter(status=Status.FAILED).order_by(
            "-finished_at", "-created_at"
        )[:limit],
    }


def models_used(*, project: Project, limit: int = 30) -> list[str]:
    """Model ids this project launched runs with, most recent first (the launch form offers them)."""
    seen: list[str] = []
    for model in (
        Run.objects.filter(project=project)
        .exclude(model="")
        .order_by("-created_at")
        .values_list("model", flat=True)[:500]
    ):
        if model not in seen:
            seen.append(model)
        if len(seen) == limit:
            break
    return seen
