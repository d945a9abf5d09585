"""Every page and API `bench/scale.py` measures answers 200, here on the query-count seed
(tests/helpers/seed.py) instead of 100,000 runs: a page renamed or an API moved would otherwise
show only when someone seeds the million spans and the benchmark stops on a 404."""

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

BENCH = str(Path(__file__).resolve().parent.parent / "bench")


@pytest.fixture
def scale():
    """bench/scale.py as a module: bench/ last on the path, so the app's packages (router)
    still win over the benchmarks' scripts of the same name."""
    sys.path.append(BENCH)
    try:
        import scale
    finally:
        sys.path.remove(BENCH)
    return scale


def test_every_page_the_scale_benchmark_measures_answers(owner, seeded, make_fine_tuned, scale):
    model = make_fine_tuned(name="my-lora-0")
    for run in seeded.runs[::3]:
        run.fine_tuned_model = model
        run.save(update_fields=["fine_tuned_model"])
    ids = {
        "harness": seeded.harnesses[0].pk,
        "run": seeded.runs[0].pk,
        "fine_tuned": model.pk,
        "big_session": seeded.big_session.pk,
    }
    ids |= scale.session_page_ids(seeded.big_session.pk, deep=100)
    ids |= scale.leaderboard_ids(owner.project)
    pages = scale.pages(ids)
    assert any(path.startswith(f"/api/v1/models/{model.pk}/benchmarks") for _, path, _ in pages)
    for label, path, htmx in pages:
        client = owner.api if path.startswith("/api/") else owner.web
        response = client.get(path, headers={"HX-Request": "true"} if htmx else {})
        assert response.status_code == 200, (label, path, response.content[:300])
