"""Run pages: My Benchmarks, a run (live log), the New benchmark dialog, cancel; a fine-tuned
model's Run benchmark form and View benchmarks panel (the Models page pulls them in)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.html import format_html_join
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from belvedir import onboarding, text
from belvedir.access import access_for_request
from belvedir.error_responses import form_error, form_status
from belvedir.errors import DomainError
from belvedir.http import see_other
from harnesses import env_secrets
from harnesses.models import Compute, Harness
from harnesses.selectors import harnesses_for
from models_registry.models import FineTunedModel
from models_registry.selectors import fine_tuned_models_for
from runs import contract, display, selectors, services
from runs.forms import LaunchForm, ModelLaunchForm
from runs.model_access import judge_shown
from runs.models import Run, Status


@login_required
def run_list(request):
    access = access_for_request(request)
    if request.htmx and request.GET.get("fragment") == "harness-runs":
        return _harness_runs(request, access)
    if onboarding.is_fragment(request):
        done = selectors.runs_for(project=access.project).exists()
        return onboarding.step_response(request, slug="run", done=done)
    if request.htmx and request.GET.get("fragment") == "model-benchmarks":
        return _model_benchmarks(request, access)
    if request.htmx and request.GET.get("fragment") == "model-scores":
        return _model_scores(request, access)
    if request.htmx and request.GET.get("fragment") == "dashboard":
        # The home page pulls this in (`hx-get`, `hx-trigger="load"`).
        context = selectors.dashboard_for(project=access.project)
        return render(request, "runs/dashboard.html", context)
    runs = selectors.runs_for(
        project=access.project,
        harness=request.GET.get("harness"),
        status=request.GET.get("status"),
        model=request.GET.get("model"),
    )
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    harnesses = harnesses_for(project=access.project)
    context = {
        "page": page,
        **_score_chart(
            project=access.project,
            harness=request.GET.get("harness"),
            model=request.GET.get("model"),
        ),
        "harnesses": harnesses,
        "fine_tuned_models": fine_tuned_models_for(project=access.project)[:100],
        "statuses": Status.choices,
        "filters": request.GET,
    }
    if request.htmx and request.GET.get("fragment") == "table":
        return render(request, "runs/list.html#run-table", context)
    return render(request, "runs/list.html", context)


def _harness_runs(request, access):
    """A harness's recent runs, the partial its page pulls in (`hx-get`, `hx-trigger="load"`)."""
    harness = access.get(Harness, pk=request.GET.get("harness") or "")
    runs = selectors.runs_for(project=harness.project, harness=harness.pk)[:10]
    context = {
        "harness": harness,
        "runs": runs,
        **_score_chart(project=harness.project, harness=harness.pk),
    }
    return render(request, "runs/list.html#harness-runs", context)


def _model_benchmarks(request, access):
    """A fine-tuned model's View benchmarks panel, the partial its Models page pulls in: its
    runs (launched against it, or reporting its name as results.model) and their chart."""
    model = access.get(
        FineTunedModel.objects.select_related("project"), pk=request.GET.get("model") or ""
    )
    runs = selectors.runs_of_fine_tuned_model(model).select_related("harness")
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    context = {
        "model": model,
        "page": page,
        **_score_chart(project=model.project, model=model.pk),
    }
    return render(request, "runs/models.html#model-benchmarks", context)


def _model_scores(request, access):
    """The Models list's "latest score per harness" cells, swapped in out of band."""
    ids = request.GET.getlist("model")[:100]
    models = access.scoped(FineTunedModel).filter(pk__in=ids)
    latest = selectors.latest_scores_by_model(project=access.project, models=models)
    context = {"rows": [(model, latest[model.pk]) for model in models]}
    return render(request, "runs/models.html#model-scores", context)


@login_required
def model_run_launch(request, model_id: str):
    """Run benchmark: a GPU harness of the project against a fine-tuned model (the Models page
    pulls this form in; without scripts it is a page of its own)."""
    access = access_for_request(request)
    model = access.get(FineTunedModel, pk=model_id)
    gpu = harnesses_for(project=model.project).filter(compute=Compute.GPU)
    form = ModelLaunchForm(request.POST or None, harness_choices=[(h.pk, h.name) for h in gpu])
    if request.method == "POST":
        access.require_write()
        # A CPU harness (posted by hand, or switched to CPU since) is refused by the service.
        harness = Harness.objects.filter(
            project=model.project, pk=request.POST.get("harness", "")
        ).first()
        if harness is not None and harness.compute != Compute.GPU:
            form.fields["harness"].choices.append((harness.pk, harness.name))
        if form.is_valid():
            try:
                run = services.run_launch_fine_tuned(
                    fine_tuned_model=model,
                    harness=harness,
                    created_by=request.user,
                    attempts=form.cleaned_data["attempts"],
                    grading=form.cleaned_data["grading"],
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                messages.success(request, f"Run {run.pk} launched against {model.name}.")
                if request.htmx:
                    return HttpResponseClientRedirect(reverse("runs:detail", args=[run.pk]))
                return see_other("runs:detail", run_id=run.pk)
    context = {"form": form, "model": model, "has_gpu_harness": gpu.exists()}
    status = form_status(form)
    if request.htmx:
        return render(request, "runs/models.html#model-launch", context, status=status)
    return render(request, "runs/models.html", context, status=status)


def _score_chart(**filters) -> dict:
    """The context `runs/_score_chart.html` draws: series with best/latest, the chart's data."""
    series = selectors.score_series(**filters)
    chart = selectors.score_chart_data(series)
    return {
        "series": series,
        "chart": chart,
        "chart_rows": _chart_rows(series),
        "per_model": bool(filters.get("harness")),
    }


def _chart_rows(series: list[dict]) -> str:
    """The chart's points as the rows of its accessible table, built here in one pass: as
    template tags (a date, a link and a score filter per row, up to SERIES_RUNS rows) they
    were about half of My Benchmarks' rendering time at 100k runs."""
    return format_html_join(
        "\n",
        '<tr><td>{}</td><td>{}</td><td><a class="mono" href="{}">{}</a></td><td>{}</td></tr>',
        (
            (
                dateformat.format(timezone.localtime(run.finished_at), "Y-m-d H:i"),
                entry["label"],
                run.detail_url,
                run.pk,
                _score_cell(run),
            )
            for entry in series
            for run in entry["runs"]
        ),
    )


def _score_cell(run: Run) -> str:
    """A chart point's score in its table: with its standard error and 95% interval."""
    shown = text.score_with_error(run.score, run.score_stderr)
    if run.score_stderr is None:
        return shown
    low, high = text.score_text(run.score_ci_low), text.score_text(run.score_ci_high)
    return f"{shown} (95% CI {low}–{high})"


@login_required
def run_detail(request, run_id: str):
    """The run page; for HTMX its live part (status, stages, results) or, with
    `fragment=log`, its log (204 while the log is still `size` characters long)."""
    access = access_for_request(request)
    run = access.get(Run, pk=run_id)
    if request.htmx and request.GET.get("fragment") == "log":
        if not run.is_terminal and request.GET.get("size") == str(run.log_size):
            return HttpResponse(status=204)
        return render(
            request, "runs/detail.html#run-log", {"run": run, "log": display.log_view(run)}
        )
    now = timezone.now()
    context = {
        "run": run,
        "queue_position": selectors.queue_position(run),
        "waiting_for": selectors.waiting_for(run),
        "stages": display.stages(run, now=now),
        "elapsed": display.elapsed(run, now=now),
        "failure_notes": display.failure_notes(run),
        "notes": display.other_notes(run),
        "results": display.results_view(run),
    }
    if request.htmx:
        return render(request, "runs/detail.html#run-live", context)
    context.update(
        managed_harbor=selectors.run_is_managed(run),  # its task sandboxes: harbor's partial
        log=display.log_view(run),
        harness_config=display.harness_config(run),
        harness_changed=display.harness_changed_since(run),
        env_names=contract.run_sandbox_env_names(run),
    )
    return render(request, "runs/detail.html", context)


@login_required
def run_log_download(request, run_id: str):
    """The run's log as a plain-text file: its stored tail, without terminal escape codes."""
    access = access_for_request(request)
    run = access.get(Run, pk=run_id)
    response = HttpResponse(
        display.log_view(run).download.encode(), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{run.pk}.log"'
    return response


@login_required
@require_POST
def run_again(request, run_id: str):
    """Launch the run's harness again with the run's settings and keys; on to the new run."""
    access = access_for_request(request)
    run = access.get(Run, write=True, pk=run_id)
    again = services.run_relaunch(run=run, created_by=request.user)
    messages.success(request, f"Run {again.pk} launched with the settings of {run.pk}.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("runs:detail", args=[again.pk]))
    return see_other("runs:detail", run_id=again.pk)


@login_required
@require_POST
def run_cancel(request, run_id: str):
    access = access_for_request(request)
    run = access.get(Run, write=True, pk=run_id)
    try:
        services.run_cancel(run=run)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.info(request, "Run cancelled.")
    return see_other("runs:detail", run_id=run.pk)


@login_required
def run_launch(request, harness_id: str | None = None):
    """The New benchmark dialog: on a harness page, or from My Benchmarks with a harness picker."""
    access = access_for_request(request)
    harness = access.get(Harness, pk=harness_id) if harness_id else None
    choices = None
    if harness is None:
        choices = [(h.pk, h.name) for h in harnesses_for(project=access.project)]
    form = LaunchForm(
        request.POST or None,
        harness_choices=choices,
        models_used=selectors.models_used(project=access.project),
    )
    if request.method == "POST":
        access.require_write()
        if form.is_valid():
            values = dict(form.cleaned_data)
            target = harness or access.get(Harness, pk=values.pop("harness"))
            try:
                run = services.run_launch(
                    project=target.project, harness=target, created_by=request.user, **values
                )
            except DomainError as exc:
                form_error(form, exc)
            else:
                messages.success(request, f"Run {run.pk} launched.")
                if request.htmx:
                    return HttpResponseClientRedirect(reverse("runs:detail", args=[run.pk]))
                return see_other("runs:detail", run_id=run.pk)
    judge = None
    if harness is not None:
        judge = judge_shown(
            # the page's project is already read: the harness's own, unless it is another's
            project=access.project if harness.project_id == access.project.pk else harness.project,
            preset=harness.preset,
            harness_env=env_secrets.env_plain(harness.env or {}, harness.env_secrets_encrypted),
        )
    context = {"form": form, "harness": harness, "judge": judge}
    status = form_status(form)
    if request.htmx:
        return render(request, "runs/launch.html#launch-form", context, status=status)
    return render(request, "runs/launch.html", context, status=status)
