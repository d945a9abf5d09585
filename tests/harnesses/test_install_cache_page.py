"""The harness page's install cache: its snapshots listed, cleared by a writer of the harness's
organization only (a reader or another organization's member changes nothing)."""

import pytest

from harnesses.models import InstallSnapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def snapshot(owner, harness):
    return InstallSnapshot.objects.create(
        organization=owner.org,
        harness=harness,
        host="worker-1 unix:///var/run/docker.sock",
        key="a" * 64,
        run_id="run_madeit",
        size_bytes=150 * 2**20,
        reused=3,
    )


def clear_url(harness) -> str:
    return f"/harnesses/{harness.pk}/install-cache/clear/"


def test_the_harness_page_lists_its_snapshots_and_clears_them(owner, harness, snapshot):
    page = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert "from run_madeit on worker-1" in page and "reused 3" in page
    assert "Clear install cache" in page

    response = owner.web.post(clear_url(harness))

    assert response.status_code == 303
    assert not InstallSnapshot.objects.exists()
    page = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert "No snapshot of this install yet" in page


def test_another_organization_or_a_reader_cannot_clear_it(
    owner, outsider, readonly, harness, snapshot
):
    assert outsider.web.post(clear_url(harness)).status_code == 404
    assert readonly.web.post(clear_url(harness)).status_code == 403
    assert (
        "Clear install cache" not in readonly.web.get(f"/harnesses/{harness.pk}/").content.decode()
    )
    assert owner.web.get(clear_url(harness)).status_code == 405
    assert InstallSnapshot.objects.filter(pk=snapshot.pk).exists()
