"""Account, organization and project settings pages."""

import math

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import defaults
from django.views.decorators.http import require_POST, require_safe

from belvedir import crypto, onboarding, services
from belvedir.access import access_for_request, switch_project
from belvedir.error_responses import form_status, form_submit
from belvedir.forms import ApiKeyForm, SignupForm
from belvedir.http import see_other
from belvedir.middleware import api_server_error_response
from belvedir.models import ApiKey, AuditEvent
from belvedir.security import SignupThrottle

NEW_KEY_SESSION = "belvedir_new_api_key"


def signup(request):
    form = SignupForm(request.POST or None)
    if request.method == "POST":
        throttle = SignupThrottle()
        if not throttle.allow_request(request, None):
            wait = max(1, math.ceil(throttle.wait() or 1))
            context = {"form": form, "retry_after_minutes": math.ceil(wait / 60)}
            response = render(request, "belvedir/signup.html", context, status=429)
            response["Retry-After"] = str(wait)
            return response
    user = form_submit(  # None on a GET too: the form is unbound
        form,
        lambda data: services.user_signup(
            email=data["email"],
            password=data["password"],
            organization_name=data["organization"],
        ),
    )
    if user is not None:
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, "Welcome! Your organization and a Default project are ready.")
        return redirect("home")
    status = form_status(form)
    return render(request, "belvedir/signup.html", {"form": form}, status=status)


def home(request):
    """Signed out: what the product is. Signed in: the project's next steps and its dashboard."""
    if not request.user.is_authenticated:
        return render(request, "belvedir/landing.html")
    access = access_for_request(request)
    has_key = access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT)).exists()
    return render(request, "belvedir/home.html", {"steps": onboarding.home_steps(has_key=has_key)})


@login_required
@require_POST
def switch(request):
    project = switch_project(request, request.POST.get("project", ""))
    messages.info(request, f"Switched to {project}.")
    next_url = request.POST.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(next_url if next_url and safe else "home")


@login_required
@require_safe
def project_settings(request):
    access = access_for_request(request)
    # A key made by a plain POST is shown once, by the GET its redirect leads to (held
    # encrypted meanwhile, like every secret we keep: the session lives in the database).
    new_key = None
    if NEW_KEY_SESSION in request.session:
        new_key = crypto.decrypt(request.session.pop(NEW_KEY_SESSION))
    return _keys_response(request, access, key_form=ApiKeyForm(prefix="key"), new_key=new_key)


def _keys_response(request, access, *, key_form: ApiKeyForm, new_key: str | None = None):
    """The project settings page, or for HTMX its `keys` partial."""
    keys = access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT))
    context = {"key_form": key_form, "new_key": new_key, "keys": keys}
    template = "belvedir/project_settings.html"
    if request.htmx:
        template += "#keys"
    return render(request, template, context, status=form_status(key_form))


@login_required
@require_POST
def api_key_create(request):
    """Create a project key; the page (or its keys partial) shows the plaintext once."""
    access = access_for_request(request)
    access.require_write()
    key_form = ApiKeyForm(request.POST, prefix="key")
    created = form_submit(
        key_form,
        lambda data: services.api_key_create(
            project=access.project, name=data["name"], created_by=request.user
        ),
    )
    new_key = None
    if created is not None:
        _, new_key = created
        if not request.htmx:
            request.session[NEW_KEY_SESSION] = crypto.encrypt(new_key)
            return see_other("project-settings")
        key_form = ApiKeyForm(prefix="key")
    return _keys_response(request, access, key_form=key_form, new_key=new_key)


@login_required
@require_POST
def api_key_revoke(request, key_id: str):
    access = access_for_request(request)
    key = access.get(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT), write=True, pk=key_id)
    services.api_key_revoke(key=key)
    if request.htmx:
        return _keys_response(request, access, key_form=ApiKeyForm(prefix="key"))
    messages.info(request, f"Key {key.name} revoked.")
    return see_other("project-settings")


@login_required
@require_POST
def project_chinese_models(request):
    """Owners and admins allow or forbid Chinese-lab models for the project's covered runs."""
    access = access_for_request(request)
    access.require_manage()
    allowed = request.POST.get("chinese_models_allowed", "") in {"1", "on", "true"}
    services.project_settings_update(
        project=access.project, chinese_models_allowed=allowed, actor=request.user
    )
    if request.htmx:
        return render(request, "belvedir/project_settings.html#chinese-models")
    state = "may" if allowed else "may no longer"
    messages.info(request, f"Covered runs of {access.project.name} {state} use Chinese-lab models.")
    return see_other("project-settings")


@login_required
def organization_audit(request):
    """The organization's audit log, newest first: owners only."""
    access = access_for_request(request)
    access.require_owner()
    events = AuditEvent.objects.filter(organization=access.organization).select_related(
        "actor_user", "actor_key"
    )
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    return render(request, "belvedir/organization_audit.html", {"page": page})


def server_error(request):
    """The 500 page; under /api/ a JSON body, never HTML."""
    if request.path.startswith("/api/"):
        return api_server_error_response()
    return defaults.server_error(request)
