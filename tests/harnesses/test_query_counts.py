"""Query counts pinned on the environments list and detail pages and the environment APIs,
with 12 environments (each made by a user), one of them at 12 versions, and pending
generations: an N+1 would add a query per row and blow the bound."""

import pytest

from harnesses import environments
from harnesses.models import EnvironmentGeneration
from tests.helpers.seed import assert_bounded

pytestmark = pytest.mark.django_db


@pytest.fixture
def environment_rows(owner):
    made = [
        environments.environment_create(
            project=owner.project, name=f"Env {i}", tasks="What is 2+2?\n", created_by=owner.user
        )
        for i in range(12)
    ]
    for i in range(11):
        environments.environment_update(
            environment=made[0], tasks=f"What is {i}+2?\n", updated_by=owner.user
        )
    for i in range(3):
        EnvironmentGeneration.objects.create(
            project=owner.project, description=f"tasks {i}", model="openai/gpt-4.1-mini"
        )
    return made


def test_the_environment_pages_take_a_fixed_number_of_queries(
    owner, environment_rows, django_assert_max_num_queries
):
    first = environment_rows[0].pk
    pages = [
        ("/environments/", 8),
        (f"/environments/{first}/", 8),  # 12 versions listed
        (f"/environments/{first}/?version=3", 8),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    assert "Env 11" in owner.web.get("/environments/").content.decode()


def test_the_environment_apis_take_a_fixed_number_of_queries(
    owner, environment_rows, django_assert_max_num_queries
):
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    first = environment_rows[0].pk
    endpoints = [
        ("/api/v1/environments", 3),
        (f"/api/v1/environments/{first}", 3),
        (f"/api/v1/environments/{first}/versions", 4),
    ]
    assert_bounded(owner.api, endpoints, django_assert_max_num_queries)
    assert owner.api.get("/api/v1/environments").json()["count"] == 12
    assert owner.api.get(f"/api/v1/environments/{first}/versions").json()["count"] == 12
