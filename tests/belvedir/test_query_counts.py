"""Query counts pinned on the organization's settings page (its members, invitations and
projects) and its audit log, with 8 members, 8 invitations, 8 projects and 30 events by
several actors: an N+1 would add a query per row and blow the bound."""

import pytest

from belvedir import audit
from belvedir.members import invitation_create
from belvedir.models import Role
from belvedir.services import project_create
from tests.helpers.seed import assert_bounded
from tests.helpers.tenants import member_of

pytestmark = pytest.mark.django_db


def test_the_organization_settings_and_audit_pages_take_a_fixed_number_of_queries(
    owner, client_factory, django_assert_max_num_queries
):
    members = [member_of(owner, client_factory, f"m{i}@example.com", Role.MEMBER) for i in range(8)]
    for i in range(8):
        invitation_create(
            organization=owner.org,
            email=f"i{i}@example.com",
            role=Role.MEMBER,
            invited_by=owner.user,
        )
        project_create(organization=owner.org, name=f"Project {i}")
    for i in range(30):
        audit.audit_record(
            action=audit.RUN_LAUNCH,
            organization=owner.org,
            target=f"run_{i}",
            actor=members[i % 8].user,
        )
    pages = [("/settings/organization/", 8), ("/settings/organization/audit/", 7)]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    assert "m7@example.com" in owner.web.get("/settings/organization/").content.decode()
