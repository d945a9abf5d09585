"""The one "is this the run's own key" check (belvedir/run_access.py): a run's key opens its
own run only; any other caller is no run's, or refused when the view asks for a run key."""

from types import SimpleNamespace

import pytest

from belvedir.errors import Forbidden, NotFound
from belvedir.models import ApiKey
from belvedir.run_access import own_run
from runs.models import Run
from tests.helpers.task_sandboxes import make_managed_run

pytestmark = pytest.mark.django_db


def _as(key) -> SimpleNamespace:
    return SimpleNamespace(auth=key)


def test_a_runs_own_key_opens_its_run_and_only_it(owner):
    run, _ = make_managed_run(owner)
    other, _ = make_managed_run(owner)

    assert own_run(_as(run.ingest_key)) == run
    assert own_run(_as(run.ingest_key), run_id=run.pk) == run
    with pytest.raises(NotFound):
        own_run(_as(run.ingest_key), run_id=other.pk)


def test_a_project_key_is_no_runs_and_is_refused_where_a_run_key_is_asked_for(owner):
    project_key = ApiKey.objects.get(project=owner.project, kind=ApiKey.Kind.PROJECT)

    assert own_run(_as(project_key)) is None
    assert own_run(_as(None), run_id="run_x") is None  # a signed-in member: no key at all
    with pytest.raises(Forbidden) as refused:
        own_run(_as(project_key), refuse="Run keys only.", code="not_managed")
    assert (refused.value.message, refused.value.code) == ("Run keys only.", "not_managed")


def test_a_run_key_whose_run_is_gone_is_a_404(owner):
    run, _ = make_managed_run(owner)
    key = run.ingest_key
    Run.objects.filter(pk=run.pk).delete()
    key.refresh_from_db()

    with pytest.raises(NotFound):
        own_run(_as(key))
