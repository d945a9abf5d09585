"""Every list API pages the same way: `limit`/`offset`, answered as {count, next, previous, results}."""

import pytest

from belvedir import services
from harnesses.models import Harness
from runs.models import Run
from traces.models import Session, TaskGroup


def _two_of_each(owner) -> None:
    services.api_key_create(project=owner.project, name="second", created_by=owner.user)
    for name in ("first", "second"):
        harness = Harness.objects.create(
            project=owner.project, name=name, repo_url="https://x.org/a/b", run_command="x"
        )
        Run.objects.create(project=owner.project, harness=harness, harness_name=name)
        Session.objects.create(project=owner.project, external_id=name)
        TaskGroup.objects.create(project=owner.project, name=name, normalized_name=name)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/keys",
        "/api/v1/harnesses",
        "/api/v1/runs",
        "/api/v1/sessions",
        "/api/v1/task-groups",
    ],
)
def test_each_list_api_answers_one_page_at_a_time(owner, path):
    _two_of_each(owner)

    first = owner.api.get(path, {"limit": 1}).json()
    second = owner.api.get(path, {"limit": 1, "offset": 1}).json()

    assert set(first) == {"count", "next", "previous", "results"}
    assert first["count"] == second["count"] == 2
    assert len(first["results"]) == len(second["results"]) == 1
    assert first["results"][0]["id"] != second["results"][0]["id"]
    assert first["previous"] is None and "offset=1" in first["next"]
    assert second["next"] is None and second["previous"] is not None


def test_a_page_never_holds_more_than_the_maximum_rows(owner, monkeypatch):
    from belvedir.pagination import Pagination

    assert (Pagination.default_limit, Pagination.max_limit) == (50, 500)
    monkeypatch.setattr(Pagination, "max_limit", 1)
    _two_of_each(owner)

    page = owner.api.get("/api/v1/runs", {"limit": 500}).json()

    assert page["count"] == 2 and len(page["results"]) == 1
