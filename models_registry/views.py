"""The Models page: fine-tuned models (list, upload, detail, delete) and the organization's
Hugging Face token (a partial Organization settings pulls in).

A model's runs are the runs app's (a higher floor): the detail page pulls in its View
benchmarks panel and Run benchmark form, and the list its latest scores, with `hx-get`.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from belvedir.access import access_for_request
from belvedir.error_responses import form_error, form_status, form_submit
from belvedir.errors import DomainError, Invalid
from belvedir.http import see_other, see_other_page
from models_registry import adapters, services
from models_registry.forms import FineTunedModelForm, HuggingFaceTokenForm
from models_registry.models import FineTunedModel
from models_registry.selectors import fine_tuned_models_for, hf_token


@login_required
def model_list(request):
    access = access_for_request(request)
    models = fine_tuned_models_for(project=access.project).select_related("created_by")
    page = Paginator(models, 25).get_page(request.GET.get("page"))
    return render(request, "models_registry/list.html", {"page": page, "form": _blank_form()})


def _blank_form() -> FineTunedModelForm:
    return FineTunedModelForm(auto_id="upload_%s")


@csrf_exempt  # checked below, once the size guard is in front of the body
@login_required
@require_POST
def model_upload(request):
    """Upload a model (the page's form posts with a progress bar): streamed to a temporary
    file through the size guard, checked, then stored."""
    guard = adapters.guard_upload(request)
    return _model_upload(request, guard)


@csrf_protect
def _model_upload(request, guard):
    access = access_for_request(request)
    access.require_write()
    form = FineTunedModelForm(request.POST, request.FILES, auto_id="upload_%s")
    if guard.exceeded:
        form_error(form, Invalid(adapters.too_large_message(guard.received), field="adapter"))
    else:
        model = form_submit(
            form,
            lambda data: services.fine_tuned_model_create(
                project=access.project, created_by=request.user, **data
            ),
        )
        if model is not None:
            messages.success(request, f"Model {model.name} uploaded.")
            return see_other_page(request, "models:detail", model_id=model.pk)
    context = {"form": form}
    if request.htmx:
        return render(request, "models_registry/list.html#upload-form", context, status=400)
    models = fine_tuned_models_for(project=access.project)
    context["page"] = Paginator(models, 25).get_page(1)
    return render(request, "models_registry/list.html", context, status=form_status(form))


@login_required
def model_detail(request, model_id: str):
    access = access_for_request(request)
    model = access.get(FineTunedModel, pk=model_id)
    return render(request, "models_registry/detail.html", {"model": model})


@login_required
@require_POST
def model_delete(request, model_id: str):
    access = access_for_request(request)
    model = access.get(FineTunedModel, write=True, pk=model_id)
    services.fine_tuned_model_delete(model=model)
    messages.success(request, f"Model {model.name} and its adapter deleted.")
    return see_other_page(request, "models:list")


@login_required
def hf_token_settings(request):
    """The organization's Hugging Face token: whether one is set (never the token), set or
    replace it, remove it (owners and admins)."""
    access = access_for_request(request)
    form = HuggingFaceTokenForm()
    status = 200
    if request.method == "POST":
        access.require_manage()
        if request.POST.get("action") == "remove":
            services.hf_token_clear(organization=access.organization)
        else:
            form = HuggingFaceTokenForm(request.POST)
            if form.is_valid():
                try:
                    services.hf_token_set(
                        organization=access.organization,
                        token=form.cleaned_data["token"],
                        updated_by=request.user,
                    )
                except DomainError as exc:
                    form_error(form, exc)
                else:
                    form = HuggingFaceTokenForm()
            status = form_status(form)
        if not request.htmx and status == 200:
            return see_other("organization-settings")
    context = {"form": form, "token": hf_token(organization=access.organization)}
    template = "models_registry/hf_token.html"
    if request.htmx:
        template += "#hf-token"
    return render(request, template, context, status=status)
