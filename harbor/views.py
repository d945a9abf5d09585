"""Harbor's pages: a run's task sandboxes, the partial the run page pulls in (`hx-get`; runs
never imports harbor, the floors) and, without HTMX, the same list as a page of its own (the
run page's link when scripts do not run)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from belvedir.access import access_for_request
from harbor import selectors
from runs.models import Run


@login_required
def run_task_sandboxes(request, run_id: str):
    """A managed Harbor run's task sandboxes (nothing for another run); for HTMX only the
    partial, which asks again every second while the run runs, as the run page's live part."""
    access = access_for_request(request)
    run = access.get(Run, pk=run_id)
    context = {"run": run, **selectors.page_view(run)}
    if request.htmx:
        return render(request, "harbor/run_task_sandboxes.html#task-sandboxes", context)
    return render(request, "harbor/run_task_sandboxes.html", context)
