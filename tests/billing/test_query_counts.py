"""Query counts pinned on the billing page (its ledger), its CSV export, the ledger and key
APIs and the project settings (its keys), with 30 ledger entries and 6 keys: an N+1 would blow
the bound."""

import pytest

from tests.helpers.seed import assert_bounded

pytestmark = pytest.mark.django_db


def test_billing_and_key_lists_take_a_fixed_number_of_queries(
    owner, seeded, django_assert_max_num_queries
):
    pages = [("/settings/organization/billing/", 10), ("/settings/project/", 6)]
    assert_bounded(owner.web, pages, django_assert_max_num_queries)
    owner.api.get("/api/v1/project")  # the key's first use of the day records it: not counted
    endpoints = [("/api/v1/billing/ledger", 3), ("/api/v1/keys", 3), ("/api/v1/billing", 4)]
    assert_bounded(owner.api, endpoints, django_assert_max_num_queries)
    assert owner.api.get("/api/v1/billing/ledger").json()["count"] == 30


def test_the_ledger_csv_takes_a_fixed_number_of_queries_to_the_last_row(
    owner, seeded, django_assert_max_num_queries
):
    """The export streams: its rows are read while the body is, so the body is read inside."""
    with django_assert_max_num_queries(5):
        response = owner.web.get("/settings/organization/billing/ledger.csv")
        body = b"".join(response.streaming_content).decode()
    assert response.status_code == 200
    assert body.count("\n") == 31 and "owner@example.com" in body  # a header and 30 entries
