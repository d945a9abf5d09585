"""Trace pages: sessions, a session as a span tree, tasks, task groups."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render

from belvedir import onboarding
from belvedir.access import access_for_request
from belvedir.errors import DomainError
from runs.models import Run
from traces import selectors
from traces.models import Session, TaskGroup


@login_required
def session_list(request):
    access = access_for_request(request)
    q = request.GET
    if onboarding.is_fragment(request):  # the home page's "send traces" step
        done = Session.objects.filter(project=access.project).exists()
        return onboarding.step_response(request, slug="traces", done=done)
    if request.htmx and q.get("fragment") in ("run-summary", "run-tokens"):
        # The run page (run-summary) and the run comparison (run-tokens, one per run) pull
        # this in (`hx-get`, `hx-trigger="load"`).
        run = access.get(Run, pk=q.get("run") or "")
        context = {"run": run, "trace": selectors.run_trace_summary(run)}
        return render(request, f"traces/sessions.html#{q['fragment']}", context)
    error, status = None, 200
    try:
        sessions = selectors.sessions_for(
            project=access.project,
            run=q.get("run"),
            outcome=q.get("outcome"),
            model=q.get("model"),
            since=q.get("since"),
            until=q.get("until"),
        )
    except DomainError as exc:
        # A filter that cannot be applied shows no rows rather than every session unfiltered.
        error, status = exc.message, 400
        sessions = Session.objects.none()
    page = Paginator(sessions, 25).get_page(q.get("page"))
    context = {"page": page, "filters": q, "filter_error": error}
    if request.htmx and q.get("fragment") == "table":
        return render(request, "traces/sessions.html#session-table", context, status=status)
    return render(request, "traces/sessions.html", context, status=status)


@login_required
def session_detail(request, session_id: str):
    access = access_for_request(request)
    session = access.get(Session.objects.select_related("run"), pk=session_id)
    tree = selectors.session_tree(session)
    rows, timeline_ms = selectors.span_rows(tree)
    return render(
        request,
        "traces/session.html",
        {
            "session": session,
            "rows": rows,
            "timeline_ms": timeline_ms,
            "tree_cut": session.span_count > len(tree),
            "tasks": session.tasks.select_related("group"),
        },
    )


@login_required
def task_group_list(request):
    access = access_for_request(request)
    groups = selectors.task_groups_for(project=access.project)
    page = Paginator(groups, 25).get_page(request.GET.get("page"))
    return render(request, "traces/task_groups.html", {"page": page})


@login_required
def task_group_detail(request, group_id: str):
    access = access_for_request(request)
    group = access.get(TaskGroup, pk=group_id)
    page = Paginator(selectors.tasks_for(project=group.project, group=group.pk), 25).get_page(
        request.GET.get("page")
    )
    return render(request, "traces/task_group.html", {"group": group, "page": page})


@login_required
def task_list(request):
    access = access_for_request(request)
    tasks = selectors.tasks_for(project=access.project)
    page = Paginator(tasks, 25).get_page(request.GET.get("page"))
    return render(request, "traces/tasks.html", {"page": page})
