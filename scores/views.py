"""Score pages: runs side by side with the paired comparison of two (the compare page,
/runs/compare/), and the leaderboards of a harness and of an environment."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import reverse

from belvedir import text
from belvedir.access import access_for_request
from belvedir.errors import Invalid, NotFound
from harnesses.models import Environment, Harness
from runs.models import Run
from runs.results import task_results
from scores import leaderboard, selectors

COMPARE_MAX = 8


@login_required
def run_compare(request):
    """Runs side by side: score, per-task results, duration, tokens (pulled from traces)."""
    access = access_for_request(request)
    ids = list(dict.fromkeys(request.GET.getlist("run")))
    if not 2 <= len(ids) <= COMPARE_MAX:
        raise Invalid(f"Pick between 2 and {COMPARE_MAX} runs to compare.", field="run")
    found = access.scope(Run).in_bulk(ids)  # one query, whatever the number of runs
    if len(found) != len(ids):
        raise NotFound("Not found.")
    runs = [found[run_id] for run_id in ids]
    tasks = [task_results(run.results) for run in runs]
    names = list(dict.fromkeys(name for per_run in tasks for name in per_run))
    # Each cell: whether the run has the task, and its result.
    rows = [(name, [(name in per_run, per_run.get(name)) for per_run in tasks]) for name in names]
    context = {"runs": runs, "task_rows": rows}
    if len(runs) == 2:  # B against A, task by task (the runs' results: no query)
        context["paired"] = _paired_view(selectors.paired_comparison(*runs))
    return render(request, "scores/compare.html", context)


def _paired_view(comparison: selectors.Comparison) -> dict:
    paired = comparison.paired
    shown = {"comparison": comparison, "paired": paired}
    if paired is not None:
        shown.update(
            difference=text.difference_text(paired.mean),
            stderr=text.score_text(paired.stderr),
            ci=f"{text.difference_text(paired.ci_low)} to {text.difference_text(paired.ci_high)}",
            p_value=text.p_value_text(paired.p_value),
        )
    return shown


def _leaderboard(request, model, subject_id: str, *, board_of, back: str, name: str):
    """A leaderboard: for HTMX the partial its subject's page pulls in (`hx-get`; harnesses
    never imports scores), without it a page of its own (that page's link fallback)."""
    subject = access_for_request(request).get(model, pk=subject_id)
    board = board_of(
        subject, pick=request.GET.get("pick") or "latest", group=request.GET.get("group", "")
    )
    context = {
        "board": board,
        "subject": subject,
        "subject_url": reverse(back, args=[subject.pk]),
        "url": reverse(name, args=[subject.pk]),
        "tie_rule": leaderboard.TIE_RULE,
    }
    if request.htmx:
        return render(request, "scores/leaderboard.html#leaderboard", context)
    return render(request, "scores/leaderboard.html", context)


@login_required
def harness_leaderboard(request, harness_id: str):
    """The harness page's leaderboard: a row per model."""
    return _leaderboard(
        request,
        Harness,
        harness_id,
        board_of=leaderboard.harness_board,
        back="harnesses:detail",
        name="scores:harness-leaderboard",
    )


@login_required
def environment_leaderboard(request, environment_id: str):
    """An environment page's leaderboard: a row per harness made from it and model."""
    return _leaderboard(
        request,
        Environment,
        environment_id,
        board_of=leaderboard.environment_board,
        back="environments:detail",
        name="scores:environment-leaderboard",
    )
