"""The organization page and membership: invitations, accepting them, roles, removals, projects.

One action per URL; a plain form is redirected after success (303), an HTMX form gets the
page's `membership` partial back.
"""

import math

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from belvedir import crypto, members, services
from belvedir.access import SESSION_PROJECT, access_for_request, switch_project
from belvedir.error_responses import form_status, form_submit
from belvedir.errors import LimitReached, NotFound
from belvedir.forms import InvitationSignupForm, InviteForm, ProjectForm
from belvedir.http import see_other, see_other_page
from belvedir.models import Invitation, Membership, Project, Role
from belvedir.security import SignupThrottle

# Shown once on the page a successful POST redirects to (the link is a secret: encrypted).
NEW_INVITATION_SESSION = "belvedir_new_invitation"
NEW_PROJECT_SESSION = "belvedir_new_project"


def _membership_context(request, access, *, invite_form=None, new_invitation=None) -> dict:
    return {
        "members": Membership.objects.filter(organization=access.organization).select_related(
            "user"
        ),
        "invitations": Invitation.objects.filter(
            organization=access.organization, accepted_at__isnull=True
        ).select_related("invited_by"),
        "invite_form": invite_form or InviteForm(prefix="invite"),
        "new_invitation": new_invitation,
        "roles": Role.choices,
        "owner_count": Membership.objects.filter(
            organization=access.organization, role=Role.OWNER
        ).count(),
    }


def _membership_response(request, access, *, invite_form=None, new_invitation=None, status=200):
    context = _membership_context(
        request, access, invite_form=invite_form, new_invitation=new_invitation
    )
    return render(request, "belvedir/organization_settings.html#membership", context, status=status)


@login_required
@require_safe
def organization_settings(request):
    access = access_for_request(request)
    new_invitation = None
    if NEW_INVITATION_SESSION in request.session:
        saved = request.session.pop(NEW_INVITATION_SESSION)
        new_invitation = {"email": saved["email"], "link": crypto.decrypt(saved["link"])}
    new_project = None
    if NEW_PROJECT_SESSION in request.session:
        new_project = Project.objects.filter(
            organization=access.organization, pk=request.session.pop(NEW_PROJECT_SESSION)
        ).first()
    context = _membership_context(request, access, new_invitation=new_invitation)
    context.update({"project_form": ProjectForm(prefix="project"), "new_project": new_project})
    return render(request, "belvedir/organization_settings.html", context)


@login_required
@require_POST
def member_invite(request):
    """Invite an email. The answer never says whether the address has an account."""
    access = access_for_request(request)
    access.require_manage()
    form = InviteForm(request.POST, prefix="invite")
    created = form_submit(
        form,
        lambda data: members.invitation_create(
            organization=access.organization,
            email=data["email"],
            role=data["role"],
            invited_by=request.user,
        ),
    )
    if created is not None:
        invitation, token = created
        new = {"email": invitation.email, "link": members.invitation_link(token)}
        if request.htmx:
            return _membership_response(request, access, new_invitation=new)
        request.session[NEW_INVITATION_SESSION] = {
            "email": new["email"],
            "link": crypto.encrypt(new["link"]),
        }
        return see_other("organization-settings")
    status = form_status(form)
    if request.htmx:
        return _membership_response(request, access, invite_form=form, status=status)
    context = _membership_context(request, access, invite_form=form)
    context["project_form"] = ProjectForm(prefix="project")
    return render(request, "belvedir/organization_settings.html", context, status=status)


def _after_change(request, access, message: str):
    messages.success(request, message)
    if request.htmx:  # the fragment shows the message
        return _membership_response(request, access)
    return see_other("organization-settings")


@login_required
@require_POST
def invitation_cancel(request, invitation_id: str):
    access = access_for_request(request)
    access.require_manage()
    invitation = members.invitation_cancel(
        organization=access.organization, invitation_id=invitation_id, by=request.user
    )
    return _after_change(request, access, f"Invitation for {invitation.email} cancelled.")


@login_required
@require_POST
def member_role(request, member_id: str):
    access = access_for_request(request)
    access.require_manage()
    membership = members.membership_role_change(
        organization=access.organization,
        member_id=member_id,
        role=request.POST.get("role", ""),
        by=request.user,
    )
    label = membership.get_role_display().lower()
    return _after_change(request, access, f"{membership.user.email} is now {label}.")


@login_required
@require_POST
def member_remove(request, member_id: str):
    access = access_for_request(request)
    access.require_manage()
    membership = members.membership_remove(
        organization=access.organization, member_id=member_id, by=request.user
    )
    if membership.user_id == request.user.pk:  # they left: their page is elsewhere now
        request.session.pop(SESSION_PROJECT, None)
        messages.info(request, f"You left {access.organization.name}.")
        return see_other_page(request, "home")
    return _after_change(request, access, f"{membership.user.email} was removed.")


@login_required
@require_POST
def project_create(request):
    """Create a project; the current project stays, the page offers to switch."""
    access = access_for_request(request)
    access.require_manage()
    form = ProjectForm(request.POST, prefix="project")
    project = form_submit(
        form,
        lambda data: services.project_create(organization=access.organization, name=data["name"]),
    )
    if project is not None:
        request.session[NEW_PROJECT_SESSION] = project.pk
        return see_other_page(request, "organization-settings")
    status = form_status(form)
    template = "belvedir/organization_settings.html"
    context = _membership_context(request, access)
    context["project_form"] = form
    if request.htmx:
        template += "#project-form"
    return render(request, template, context, status=status)


# --- the invitee's side --------------------------------------------------------------------


def _invitation_or_404(token: str) -> Invitation:
    invitation = members.invitation_for_token(token=token)
    if invitation is None:
        raise NotFound(members.INVALID_LINK)
    return invitation


@require_safe
def invitation(request, token: str):
    """The link's page: accept when signed in as the invited address, else log in or sign up."""
    invitation = _invitation_or_404(token)
    context = {"invitation": invitation, "token": token, "form": InvitationSignupForm()}
    return render(request, "belvedir/invitation.html", context)


@login_required
@require_POST
def invitation_accept(request, token: str):
    membership = members.invitation_accept(token=token, user=request.user)
    _switch_to(request, membership)
    messages.success(request, f"You joined {membership.organization.name}.")
    return see_other("home")


@require_POST
def invitation_signup(request, token: str):
    invitation = _invitation_or_404(token)
    form = InvitationSignupForm(request.POST)
    throttle = SignupThrottle()  # the sign-up page's limit per address
    if not throttle.allow_request(request, None):
        wait = max(1, math.ceil(throttle.wait() or 1))
        raise LimitReached(
            f"Too many sign-ups from your address. Try again in {math.ceil(wait / 60)} minutes.",
            retry_after=wait,
        )
    user = form_submit(
        form, lambda data: members.invitation_signup(token=token, password=data["password"])
    )
    if user is not None:
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        membership = Membership.objects.get(user=user, organization=invitation.organization)
        _switch_to(request, membership)
        messages.success(request, f"Welcome! You joined {invitation.organization.name}.")
        return see_other("home")
    context = {"invitation": invitation, "token": token, "form": form}
    return render(request, "belvedir/invitation.html", context, status=form_status(form))


def _switch_to(request, membership: Membership) -> None:
    project = membership.organization.projects.order_by("created_at").first()
    if project is not None:
        switch_project(request, project.pk)
