"""`manage.py bootstrap`: idempotent provisioning that prints a working project key last."""

import stat
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from belvedir import services
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


def test_bootstrap_with_a_key_file_prints_the_same_key_again_and_keeps_one(db, tmp_path):
    key_file = tmp_path / "var" / "make-up-key"
    first = _bootstrap("--key-file", str(key_file))[-1]
    second = _bootstrap("--key-file", str(key_file))[-1]
    assert first == second and _works(second)
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 1
    assert key_file.read_text().strip() == first
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_revoked_key_in_the_key_file_is_replaced_by_a_new_one_kept_in_its_place(db, tmp_path):
    key_file = tmp_path / "make-up-key"
    first = _bootstrap("--key-file", str(key_file))[-1]
    services.api_key_revoke(key=ApiKey.objects.get())
    second = _bootstrap("--key-file", str(key_file))[-1]
    assert second != first and _works(second) and not _works(first)
    assert key_file.read_text().strip() == second
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_key_file_whose_key_this_database_does_not_hold_gets_a_new_key(db, tmp_path):
    key_file = tmp_path / "make-up-key"
    key_file.write_text("bv_live_" + "x" * 40 + "\n")  # another database's key, say
    fresh = _bootstrap("--key-file", str(key_file))[-1]
    assert fresh.startswith("bv_live_") and fresh != "bv_live_" + "x" * 40 and _works(fresh)
    assert key_file.read_text().strip() == fresh


def test_bootstrap_again_keeps_the_owner_signed_in(db, client):
    _bootstrap()
    assert client.get("/harnesses/").status_code == 302  # signed out: to the log-in page
    client.force_login(get_user_model().objects.get())
    assert client.get("/harnesses/").status_code == 200
    _bootstrap()  # the next `make up`: same password, so the same hash and the same sessions
    assert client.get("/harnesses/").status_code == 200
    user = get_user_model().objects.get()
    assert user.check_password("s3cret-pass")
