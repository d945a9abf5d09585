"""The people the shared fixtures (tests/conftest.py) sign up: a Tenant is a user of an
organization with its project, a project API key, an API client and a signed-in browser client."""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from belvedir import services
from belvedir.models import Membership
from billing.services import account_update


@dataclass
class Tenant:
    user: object
    org: object
    project: object
    key: str
    api: APIClient
    web: object


def tenant(client_factory, email: str, org_name: str) -> Tenant:
    user = services.user_signup(email=email, password="correct-horse-9", organization_name=org_name)
    membership = Membership.objects.get(user=user)
    org = membership.organization
    project = org.projects.get()
    _, key = services.api_key_create(project=project, name="tests", created_by=user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    web = client_factory()
    web.force_login(user)
    return Tenant(user, org, project, key, api, web)


def member_of(owner: Tenant, client_factory, email: str, role: str) -> Tenant:
    """Another user in the owner's organization with this role, signed in to the browser and API."""
    user = get_user_model().objects.create_user(
        username=email, email=email, password="correct-horse-9"
    )
    Membership.objects.create(user=user, organization=owner.org, role=role)
    web = client_factory()
    web.force_login(user)
    api = APIClient()
    api.force_authenticate(user=user)
    return Tenant(user, owner.org, owner.project, "", api, web)


def pay_as_you_go(org) -> None:
    """Turn pay as you go on for `org`, as an owner would under Billing: the organization may
    then save and launch managed Harbor harnesses (harnesses.managed: it holds credits or has
    pay as you go on), with runs still free unless a test sets a price."""
    account_update(organization=org, pay_as_you_go=True)
