"""Query counts pinned on the billing page (its ledger), the ledger and key APIs and the
project settings (its keys), with 30 ledger entries and 6 keys: an N+1 would blow the bound."""

import pytest

pytestmark = pytest.mark.django_db


def test_billing_and_key_lists_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    pages = [("/settings/organization/billing/", 10), ("/settings/project/", 6)]
    for url, bound in pages:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.web.get(url)
        assert response.status_code == 200, url
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    endpoints = [("/api/v1/billing/ledger", 3), ("/api/v1/keys", 3), ("/api/v1/billing", 4)]
    for url, bound in endpoints:
        with django_assert_max_num_queries(bound, info=url):
            response = owner.api.get(url)
        assert response.status_code == 200, (url, response.content[:300])
    assert owner.api.get("/api/v1/billing/ledger").json()["count"] == 30
