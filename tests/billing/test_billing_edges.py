"""Pay as you go's monthly limit counts this month's run charges net of their own refunds;
coupon codes are one per spelling, whatever the case."""

from datetime import timedelta

import pytest

from belvedir.errors import PaymentRequired
from billing import selectors, services
from billing.models import Kind, LedgerEntry

DOLLAR = 1_000_000

pytestmark = pytest.mark.django_db


@pytest.fixture
def payg(owner, settings):
    settings.BELVEDIR_RUN_PRICE_CPU_USD = 0.50
    services.account_update(
        organization=owner.org, pay_as_you_go=True, monthly_limit_micros=DOLLAR, by=owner.user
    )
    return owner.org


def test_a_refund_of_last_months_charge_makes_no_room_this_month(payg):
    old = services.run_charge(organization=payg, reference="run_old", gpu=False)
    LedgerEntry.objects.filter(pk=old.pk).update(
        created_at=selectors.month_start() - timedelta(days=3)
    )
    services.run_refund(organization_id=payg.pk, reference="run_old")  # refunded this month
    services.run_charge(organization=payg, reference="run_a", gpu=False)
    services.run_charge(organization=payg, reference="run_b", gpu=False)

    assert selectors.month_run_spend(organization=payg) == DOLLAR
    with pytest.raises(PaymentRequired) as refused:
        services.run_charge(organization=payg, reference="run_c", gpu=False)
    assert refused.value.code == "monthly_limit"
    assert not LedgerEntry.objects.filter(reference="run_c").exists()


def test_a_refund_of_this_months_charge_gives_its_room_back(payg):
    services.run_charge(organization=payg, reference="run_a", gpu=False)
    services.run_charge(organization=payg, reference="run_b", gpu=False)
    services.run_refund(organization_id=payg.pk, reference="run_b")
    assert selectors.month_run_spend(organization=payg) == DOLLAR // 2
    assert services.run_charge(organization=payg, reference="run_c", gpu=False).kind == Kind.CHARGE


def test_pay_as_you_go_at_its_monthly_limit_may_not_start_a_credit_run(payg):
    assert services.may_start_credit_run(organization=payg) is True
    services.run_charge(organization=payg, reference="run_a", gpu=False)
    services.run_charge(organization=payg, reference="run_b", gpu=False)
    assert selectors.balance(organization=payg) == -DOLLAR
    assert services.may_start_credit_run(organization=payg) is False


def test_no_two_coupons_differ_only_by_case(db):
    # Redeeming looks a code up whatever its case: "welcome" next to "WELCOME" would make
    # which one a code redeems a matter of chance.
    from django.db import IntegrityError, transaction

    from billing.models import Coupon

    Coupon.objects.create(code="WELCOME", amount_micros=DOLLAR)
    with pytest.raises(IntegrityError), transaction.atomic():
        Coupon.objects.create(code="welcome", amount_micros=50 * DOLLAR)
    assert Coupon.objects.count() == 1


def test_an_operators_entry_shows_belvedir_and_a_members_shows_their_email(superuser, funded):
    # The operator's address is Belvedir's staff's, not the customer's to read.
    from billing.models import Coupon

    services.ledger_operator_entry(
        organization=funded.org,
        kind=Kind.CREDIT,
        amount_micros=DOLLAR,
        note="pilot",
        created_by=superuser.user,
    )
    Coupon.objects.create(code="HELLO", amount_micros=DOLLAR)
    services.coupon_redeem(organization=funded.org, code="HELLO", created_by=funded.user)

    page = funded.web.get("/settings/organization/billing/").content.decode()
    csv_text = b"".join(
        funded.web.get("/settings/organization/billing/ledger.csv").streaming_content
    ).decode()
    api = {
        e["reference"]: e["created_by"]
        for e in funded.api.get("/api/v1/billing/ledger").json()["results"]
    }
    for shown in (page, csv_text):
        assert "operator@example.com" not in shown
        assert "Belvedir" in shown and funded.user.email in shown
    assert api == {"pilot": "Belvedir", "HELLO": funded.user.email, "welcome credit": ""}
