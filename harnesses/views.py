"""Harness pages: list, New Harness (catalog cards + form), detail/edit, delete."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_POST

from belvedir import onboarding
from belvedir.access import access_for_request
from belvedir.error_responses import form_status, form_submit
from belvedir.errors import DomainError
from belvedir.http import see_other, see_other_page
from harnesses import install_cache, services
from harnesses.catalog import presets_by_group
from harnesses.forms import HarnessForm
from harnesses.models import Harness
from harnesses.selectors import harnesses_for


@login_required
def harness_list(request):
    access = access_for_request(request)
    harnesses = harnesses_for(project=access.project)
    if onboarding.is_fragment(request):  # the home page's "add a harness" step
        return onboarding.step_response(request, slug="harness", done=harnesses.exists())
    page = Paginator(harnesses, 25).get_page(request.GET.get("page"))
    return render(request, "harnesses/list.html", {"page": page})


@login_required
def harness_new(request):
    access = access_for_request(request)
    preset_error = None
    if request.method == "POST":
        access.require_write()
        form = HarnessForm(request.POST)
        harness = form_submit(
            form,
            lambda data: services.harness_create(
                project=access.project, created_by=request.user, **data
            ),
        )
        if harness is not None:
            messages.success(request, f"Harness {harness.name} created.")
            return see_other_page(request, "harnesses:detail", harness_id=harness.pk)
    else:
        initial = {"compute": "cpu"}
        if request.GET.get("preset"):
            try:
                initial = HarnessForm.initial_from(
                    services.harness_defaults_from_preset(request.GET["preset"])
                )
            except DomainError as exc:
                preset_error = exc.message
        form = HarnessForm(initial=initial)
    context = {"form": form, "groups": presets_by_group(), "preset_error": preset_error}
    status = form_status(form) if form.errors else 400 if preset_error else 200
    if request.htmx:
        return render(request, "harnesses/new.html#form", context, status=status)
    return render(request, "harnesses/new.html", context, status=status)


@login_required
def harness_detail(request, harness_id: str):
    access = access_for_request(request)
    harness = access.get(Harness, pk=harness_id)
    saved = False
    if request.method == "POST":
        access.require_write()
        form = HarnessForm(request.POST)
        updated = form_submit(form, lambda data: services.harness_update(harness=harness, **data))
        if updated is not None:
            if not request.htmx:
                messages.success(request, "Saved.")
                return see_other("harnesses:detail", harness_id=harness.pk)
            saved = True
            form = HarnessForm(
                initial=HarnessForm.initial_from(services.harness_values(harness=harness))
            )
    else:
        form = HarnessForm(
            initial=HarnessForm.initial_from(services.harness_values(harness=harness))
        )
    # Its recent runs and the launch dialog are the runs app's partials, pulled in with hx-get.
    snapshots = harness.install_snapshots.all()
    context = {"harness": harness, "form": form, "saved": saved, "snapshots": snapshots}
    status = form_status(form)
    if request.htmx:
        return render(request, "harnesses/detail.html#form", context, status=status)
    return render(request, "harnesses/detail.html", context, status=status)


@login_required
@require_POST
def harness_delete(request, harness_id: str):
    access = access_for_request(request)
    harness = access.get(Harness, write=True, pk=harness_id)
    services.harness_delete(harness=harness)
    messages.info(request, f"Harness {harness.name} deleted.")
    return see_other("harnesses:list")


@login_required
@require_POST
def install_cache_clear(request, harness_id: str):
    """Forget the harness's install snapshots on every worker host: its next run installs."""
    access = access_for_request(request)
    harness = access.get(Harness, write=True, pk=harness_id)
    cleared = install_cache.clear(harness=harness)
    messages.info(request, f"Install cache cleared ({cleared} snapshot{'s' * (cleared != 1)}).")
    return see_other("harnesses:detail", harness_id=harness.pk)
