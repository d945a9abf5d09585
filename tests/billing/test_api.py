"""GET/PATCH /api/v1/billing, the ledger and coupon redemption: who may do what."""

import pytest

from belvedir.models import AuditEvent
from billing import selectors
from billing.models import LedgerEntry

pytestmark = pytest.mark.django_db


def test_the_billing_api_shows_the_balance_pay_as_you_go_and_free_runs(funded):
    body = funded.api.get("/api/v1/billing").json()
    assert body["balance_micros"] == 10_000_000
    assert body["pay_as_you_go"] is False
    assert body["run_price_cpu_micros"] == body["run_price_gpu_micros"] == 0


def test_run_prices_set_by_the_operator_are_shown_in_micros(funded, settings):
    settings.BELVEDIR_RUN_PRICE_CPU_USD = 0.5
    settings.BELVEDIR_RUN_PRICE_GPU_USD = 5
    body = funded.api.get("/api/v1/billing").json()
    assert (body["run_price_cpu_micros"], body["run_price_gpu_micros"]) == (500_000, 5_000_000)


def test_an_outsider_sees_only_its_own_organizations_balance(funded, outsider):
    body = outsider.api.get("/api/v1/billing").json()
    assert body["organization"] == outsider.org.pk and body["balance_micros"] == 0
    assert outsider.api.get("/api/v1/billing/ledger").json()["count"] == 0


def test_an_owner_turns_pay_as_you_go_on_and_it_is_audited(owner):
    owner.api.force_authenticate(user=owner.user)
    response = owner.api.patch(
        "/api/v1/billing",
        {"pay_as_you_go": True, "monthly_limit_micros": 50_000_000},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["pay_as_you_go"] is True
    assert selectors.account_for(organization=owner.org).monthly_limit_micros == 50_000_000
    event = AuditEvent.objects.get(action="billing.change", organization=owner.org)
    assert event.actor_user == owner.user
    assert event.metadata["after"]["pay_as_you_go"] is True


def test_pay_as_you_go_is_for_owners_not_members_read_only_members_or_project_keys(
    owner, member, readonly
):
    for client in (member.api, readonly.api, owner.api):  # owner.api uses the project key
        response = client.patch("/api/v1/billing", {"pay_as_you_go": True}, format="json")
        assert response.status_code == 403, response.content
    assert selectors.account_for(organization=owner.org).pay_as_you_go is False


def test_a_bad_pay_as_you_go_value_is_a_400_naming_the_field(owner):
    owner.api.force_authenticate(user=owner.user)
    response = owner.api.patch("/api/v1/billing", {"monthly_limit_micros": -1}, format="json")
    assert response.status_code == 400
    assert "monthly_limit_micros" in response.json()
    # Past a billion dollars: the error names the API's field too, not the form's.
    response = owner.api.patch("/api/v1/billing", {"monthly_limit_micros": 10**16}, format="json")
    assert response.status_code == 400
    assert "monthly_limit_micros" in response.json()
    response = owner.api.patch("/api/v1/billing", {"pay_as_you_go": "maybe"}, format="json")
    assert response.status_code == 400
    assert "pay_as_you_go" in response.json()


def test_the_ledger_lists_entries_newest_first_and_paginates(funded):
    funded.api.post("/api/v1/billing/coupons/redeem", {"code": "WELCOME25"}, format="json")
    body = funded.api.get("/api/v1/billing/ledger?limit=1").json()
    assert body["count"] == 2 and body["next"]
    assert [e["kind"] for e in body["results"]] == ["coupon"]
    assert body["results"][0]["amount_micros"] == 25_000_000


def test_a_key_redeems_a_coupon_and_the_balance_grows(funded):
    response = funded.api.post(
        "/api/v1/billing/coupons/redeem", {"code": "welcome25"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["balance_micros"] == 35_000_000
    again = funded.api.post("/api/v1/billing/coupons/redeem", {"code": "WELCOME25"}, format="json")
    assert again.status_code == 400
    assert "already redeemed" in again.json()["code"][0]


def test_a_read_only_member_cannot_redeem_a_coupon(funded, readonly):
    response = readonly.api.post(
        "/api/v1/billing/coupons/redeem", {"code": "WELCOME25"}, format="json"
    )
    assert response.status_code == 403
    assert not LedgerEntry.objects.filter(kind="coupon").exists()


@pytest.mark.parametrize("body, field", [({}, "code"), ({"code": "NOPE"}, "code")])
def test_a_missing_or_unknown_coupon_code_is_a_400_naming_the_code(funded, body, field):
    response = funded.api.post("/api/v1/billing/coupons/redeem", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_without_a_key_the_billing_api_answers_401(db):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/billing").status_code == 401
