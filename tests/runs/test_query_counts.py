"""Query counts pinned on the run and harness lists, pages and APIs, with 30 runs over three
harnesses (every status, three models, scores, sessions): an N+1 would add a query per row
and blow the bound. A bound that a change legitimately raises is raised with it, on purpose."""

import pytest

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_my_benchmarks_and_its_filters_and_partials_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    harness = seeded.harnesses[0].pk
    pages = [
        ("/runs/", {}, 9),
        (f"/runs/?harness={harness}", {}, 9),
        ("/runs/?status=succeeded", {}, 9),
        ("/runs/?model=qwen/qwen3-32b", {}, 9),
        (f"/runs/?harness={harness}&status=failed&model=openai/gpt-4.1-mini", {}, 9),
        ("/runs/?page=2", {}, 9),
        ("/runs/?fragment=table", HTMX, 7),
        ("/runs/?fragment=dashboard", HTMX, 7),
        ("/", {}, 6),
    ]
    for url, headers, bound in pages:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.web.get(url, **headers)
        assert response.status_code == 200, url
    assert seeded.runs[-1].pk in owner.web.get("/runs/").content.decode()


def test_harness_pages_and_the_runs_partial_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    harness = seeded.harnesses[0].pk
    pages = [
        ("/harnesses/", {}, 7),
        (f"/harnesses/{harness}/", {}, 6),
        (f"/runs/?fragment=harness-runs&harness={harness}", HTMX, 8),
    ]
    for url, headers, bound in pages:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.web.get(url, **headers)
        assert response.status_code == 200, url


def test_a_run_page_its_live_part_and_compare_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    run = seeded.runs[0].pk
    compare = "&".join(f"run={r.pk}" for r in seeded.runs[:8])
    pages = [
        (f"/runs/{run}/", {}, 8),
        (f"/runs/{run}/", HTMX, 5),
        (f"/runs/compare/?{compare}", {}, 6),  # 8 runs: one query for all of them
    ]
    for url, headers, bound in pages:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.web.get(url, **headers)
        assert response.status_code == 200, url


def test_the_run_and_harness_apis_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    harness = seeded.harnesses[0].pk
    endpoints = [
        ("/api/v1/runs", 3),
        (f"/api/v1/runs?harness={harness}&status=succeeded", 3),
        ("/api/v1/runs?limit=100", 3),
        (f"/api/v1/runs/{seeded.runs[0].pk}", 2),
        ("/api/v1/harnesses", 3),
        (f"/api/v1/harnesses/{harness}", 2),
        ("/api/v1/catalog", 1),
    ]
    for url, bound in endpoints:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.api.get(url)
        assert response.status_code == 200, (url, response.content[:300])
    assert len(owner.api.get("/api/v1/runs?limit=100").json()["results"]) == 30
