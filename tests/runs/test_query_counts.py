"""Query counts pinned on the run and harness lists, pages and APIs, with 30 runs over three
harnesses (every status, three models, scores, sessions): an N+1 would add a query per row
and blow the bound. A bound that a change legitimately raises is raised with it, on purpose."""

import pytest

from harbor.models import TaskSandbox
from tests.helpers.seed import assert_bounded

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_my_benchmarks_and_its_filters_and_partials_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    harness = seeded.harnesses[0].pk
    pages = [
        ("/runs/", {}, 10),
        (f"/runs/?harness={harness}", {}, 10),
        ("/runs/?status=succeeded", {}, 10),
        # A model filter looks the model up among fine-tuned ones (list and chart): +2
        ("/runs/?model=qwen/qwen3-32b", {}, 12),
        (f"/runs/?harness={harness}&status=failed&model=openai/gpt-4.1-mini", {}, 12),
        ("/runs/?page=2", {}, 10),
        ("/runs/?fragment=table", HTMX, 7),
        ("/runs/?fragment=dashboard", HTMX, 7),
        ("/", {}, 6),
        # The New benchmark dialog: the harness picker (3) and the models used (3) as choices.
        ("/runs/new/", {}, 7),
        ("/runs/new/", HTMX, 7),
        (f"/runs/launch/{harness}/", {}, 7),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    assert seeded.runs[-1].pk in owner.web.get("/runs/").content.decode()


def test_harness_pages_and_the_runs_partial_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    harness = seeded.harnesses[0].pk
    pages = [
        ("/harnesses/", {}, 7),
        (f"/harnesses/{harness}/", {}, 7),  # its install snapshots: one query
        (f"/runs/?fragment=harness-runs&harness={harness}", HTMX, 8),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)


def test_a_run_page_its_live_part_and_compare_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    run = seeded.runs[0].pk
    compare = "&".join(f"run={r.pk}" for r in seeded.runs[:8])
    pair = "&".join(f"run={r.pk}" for r in seeded.runs[:2])
    pages = [
        (f"/runs/{run}/", {}, 8),
        (f"/runs/{run}/", HTMX, 5),
        (f"/runs/compare/?{compare}", {}, 6),  # 8 runs: one query for all of them
        (f"/runs/compare/?{pair}", {}, 6),  # two: the paired comparison reads no more
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)


def test_the_run_and_harness_apis_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    harness = seeded.harnesses[0].pk
    for i in range(6):
        TaskSandbox.objects.create(run=seeded.runs[0], name=f"task-{i}")
    endpoints = [
        ("/api/v1/runs", 3),
        (f"/api/v1/runs?harness={harness}&status=succeeded", 3),
        ("/api/v1/runs?limit=100", 3),
        (f"/api/v1/runs/{seeded.runs[0].pk}", 2),
        ("/api/v1/harnesses", 3),
        (f"/api/v1/harnesses/{harness}", 2),
        ("/api/v1/catalog", 1),
        (f"/api/v1/runs/{seeded.runs[0].pk}/task-sandboxes", 4),  # 6 task sandboxes
    ]
    assert_bounded(owner.api, endpoints, django_assert_max_num_queries)
    assert len(owner.api.get("/api/v1/runs?limit=100").json()["results"]) == 30


def test_the_models_page_and_its_benchmark_partials_take_a_fixed_number_of_queries(
    owner, seeded, make_fine_tuned, django_assert_max_num_queries
):
    models = [make_fine_tuned(name=f"lora-{i}") for i in range(5)]
    for i, run in enumerate(seeded.runs):
        run.fine_tuned_model = models[i % 5]
        run.save(update_fields=["fine_tuned_model"])
    scores = "&".join(f"model={m.pk}" for m in models)
    pages = [
        ("/models/", {}, 8),
        (f"/runs/?fragment=model-scores&{scores}", HTMX, 8),
        (f"/runs/?fragment=model-benchmarks&model={models[0].pk}", HTMX, 9),
        (f"/runs/?model={models[0].pk}", {}, 12),
    ]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
