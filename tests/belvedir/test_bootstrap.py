"""`manage.py bootstrap`: idempotent provisioning that prints a working project key last."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from belvedir.models import ApiKey, Membership, Organization, Project, Role

ARGS = [
    "--org",
    "Umbrella",
    "--project",
    "Evals",
    "--email",
    "Ops@Umbrella.example",
    "--password",
    "s3cret-pass",
]


def _bootstrap(*extra) -> list[str]:
    out, err = StringIO(), StringIO()
    call_command("bootstrap", *ARGS, *extra, stdout=out, stderr=err)
    return out.getvalue().splitlines()


def _works(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.get("/api/v1/harnesses").status_code == 200


def test_bootstrap_creates_an_organization_project_and_owner_and_prints_a_working_key_last(db):
    lines = _bootstrap()
    key = lines[-1]
    assert key.startswith("bv_live_")
    assert _works(key)
    user = get_user_model().objects.get(email="ops@umbrella.example")
    assert user.check_password("s3cret-pass")
    membership = Membership.objects.get(user=user)
    assert membership.role == Role.OWNER and membership.organization.name == "Umbrella"
    assert ApiKey.objects.get(hashed__isnull=False).project.name == "Evals"


def test_bootstrap_twice_keeps_one_organization_one_project_one_user(db):
    first = _bootstrap()[-1]
    second = _bootstrap()[-1]
    assert Organization.objects.count() == 1
    assert Project.objects.filter(name="Evals").count() == 1
    assert get_user_model().objects.count() == 1
    assert Membership.objects.count() == 1
    assert first != second and _works(first) and _works(second)


def test_bootstrap_into_an_existing_organization_adds_the_project(db):
    _bootstrap()
    out = StringIO()
    call_command(
        "bootstrap",
        "--org",
        "Umbrella",
        "--project",
        "Second",
        "--email",
        "ops@umbrella.example",
        "--password",
        "s3cret-pass",
        stdout=out,
        stderr=StringIO(),
    )
    assert Organization.objects.count() == 1
    assert set(Project.objects.values_list("name", flat=True)) == {"Evals", "Second"}
    assert out.getvalue().splitlines()[-1].startswith("bv_live_")


def test_bootstrap_can_make_the_owner_a_django_admin(db):
    _bootstrap("--superuser")
    user = get_user_model().objects.get()
    assert user.is_staff and user.is_superuser


def test_bootstrap_refuses_an_email_that_is_not_one(db):
    with pytest.raises(CommandError, match="--email"):
        call_command(
            "bootstrap",
            "--org",
            "O",
            "--project",
            "P",
            "--email",
            "nope",
            "--password",
            "x",
            stdout=StringIO(),
            stderr=StringIO(),
        )
