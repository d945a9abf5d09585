"""Query counts pinned on a fine-tuned model's page and the model APIs (the fine-tuned list,
a model's benchmarks), with 5 models and 30 runs over them (three harnesses, every status):
an N+1 would add a query per row and blow the bound."""

import pytest

from tests.helpers.seed import assert_bounded

pytestmark = pytest.mark.django_db


def test_a_model_s_page_and_the_model_apis_take_a_fixed_number_of_queries(
    owner, seeded, make_fine_tuned, django_assert_max_num_queries
):
    models = [make_fine_tuned(name=f"lora-{i}") for i in range(5)]
    for i, run in enumerate(seeded.runs):
        run.fine_tuned_model = models[i % 2]  # 15 runs of the first model
        run.save(update_fields=["fine_tuned_model"])
    first = models[0].pk
    assert_bounded(owner.web, [(f"/models/{first}/", 7)], django_assert_max_num_queries)
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    endpoints = [("/api/v1/models/fine-tuned", 3), (f"/api/v1/models/{first}/benchmarks", 4)]
    assert_bounded(owner.api, endpoints, django_assert_max_num_queries)
    assert len(owner.api.get("/api/v1/models/fine-tuned").json()["results"]) == 5
