"""The one scoping helper: `scoped` lists the current project, `get` opens what the caller may see."""

import pytest

from belvedir import services
from belvedir.access import access_for_key, access_for_user
from belvedir.errors import Forbidden, NotFound
from belvedir.models import ApiKey
from harnesses import services as harness_services
from harnesses.models import Harness


def _harness(project, name: str) -> Harness:
    return harness_services.harness_create(
        project=project, name=name, repo_url="https://github.com/example/h.git", run_command="true"
    )


@pytest.fixture
def research(owner):
    """A second project in the owner's organization, with a harness of its own."""
    project = services.project_create(organization=owner.org, name="Research")
    return project, _harness(project, "Research harness")


def test_scoped_lists_only_the_current_projects_rows(owner, harness, research):
    access = access_for_user(owner.user)
    assert access.project == owner.project
    assert list(access.scoped(Harness)) == [harness]
    assert set(access.scope(Harness)) == {harness, research[1]}


def test_scoped_follows_the_project_switched_to_in_the_session(owner, harness, research):
    project, other = research
    access = access_for_user(owner.user, {"belvedir_project_id": project.pk})
    assert access.project == project
    assert list(access.scoped(Harness)) == [other]


def test_scoped_takes_a_queryset_and_keeps_its_filters(owner, harness):
    access = access_for_user(owner.user)
    assert list(access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT))) == list(
        ApiKey.objects.filter(project=owner.project, kind=ApiKey.Kind.PROJECT)
    )
    assert not access.scoped(ApiKey.objects.filter(kind=ApiKey.Kind.RUN)).exists()


def test_an_outsider_sees_none_of_another_organizations_rows(owner, outsider, harness, research):
    access = access_for_user(outsider.user)
    assert not access.scoped(Harness).exists()
    assert not access.scope(Harness).exists()
    with pytest.raises(NotFound):
        access.get(Harness, pk=harness.pk)


def test_a_read_only_member_lists_and_opens_but_may_not_write(readonly, harness):
    access = access_for_user(readonly.user)
    assert list(access.scoped(Harness)) == [harness]
    assert access.get(Harness, pk=harness.pk) == harness
    with pytest.raises(Forbidden):
        access.get(Harness, write=True, pk=harness.pk)


def test_a_project_key_sees_its_own_project_only(owner, harness, research):
    key = ApiKey.objects.get(project=owner.project, name="tests")
    access = access_for_key(key)
    assert list(access.scoped(Harness)) == [harness]
    assert list(access.scope(Harness)) == [harness]
    with pytest.raises(NotFound):
        access.get(Harness, pk=research[1].pk)


def test_list_pages_show_the_current_project_and_detail_pages_open_the_organizations(
    owner, harness, research
):
    other = research[1]
    listing = owner.web.get("/harnesses/").content.decode()
    assert harness.name in listing and other.name not in listing
    assert owner.web.get(f"/harnesses/{other.pk}/").status_code == 200


def test_list_apis_show_the_keys_project_only(owner, harness, research):
    body = owner.api.get("/api/v1/harnesses").json()
    assert [h["id"] for h in body["results"]] == [harness.pk]
    assert owner.api.get(f"/api/v1/harnesses/{research[1].pk}").status_code == 404


def test_run_selectors_take_the_project_and_list_nothing_of_another(owner, harness, research):
    from runs.models import Run
    from runs.selectors import runs_for

    project, other = research
    mine = Run.objects.create(project=owner.project, harness=harness, harness_name="Smoke")
    theirs = Run.objects.create(project=project, harness=other, harness_name=other.name)
    assert list(runs_for(project=owner.project)) == [mine]
    assert list(runs_for(project=project)) == [theirs]
    assert list(runs_for(project=owner.project, harness=other.pk)) == []
    listing = owner.web.get("/runs/").content.decode()
    assert mine.pk in listing and theirs.pk not in listing
