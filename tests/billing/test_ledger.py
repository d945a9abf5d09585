"""The ledger, the balance and coupons, through the services."""

from datetime import timedelta

import pytest
from django.utils import timezone

from belvedir import services as core
from belvedir.errors import Invalid
from belvedir.models import AuditEvent
from billing import selectors, services
from billing.models import Coupon, CouponRedemption, Kind, LedgerEntry
from billing.money import usd, usd_to_micros
from tests.helpers.race import race

DOLLAR = 1_000_000


def credit(org, dollars: float, note: str = "welcome credit") -> LedgerEntry:
    return services.ledger_operator_entry(
        organization=org, kind=Kind.CREDIT, amount_micros=usd_to_micros(dollars), note=note
    )


def test_the_balance_is_the_sum_of_the_ledger_entries(owner):
    assert selectors.balance(organization=owner.org) == 0
    credit(owner.org, 10)
    services.ledger_operator_entry(
        organization=owner.org,
        kind=Kind.ADJUSTMENT,
        amount_micros=-2_500_000,
        note="goodwill reversed",
    )
    assert selectors.balance(organization=owner.org) == 7_500_000
    assert usd(selectors.balance(organization=owner.org)) == "$7.50"
    assert (usd(15_000), usd(-4_000), usd(1), usd(1_234_567_890)) == (
        "$0.015",
        "-$0.004",
        "$0.000001",
        "$1,234.56789",
    )


def test_one_organizations_entries_never_count_toward_anothers_balance(owner, outsider):
    credit(owner.org, 10)
    assert selectors.balance(organization=outsider.org) == 0
    assert list(selectors.ledger_for(organization=outsider.org)) == []


@pytest.mark.parametrize(
    "kind, amount, note, field",
    [
        (Kind.CREDIT, -DOLLAR, "x", "amount"),
        (Kind.CREDIT, 0, "x", "amount"),
        (Kind.CHARGE, -DOLLAR, "x", "kind"),
        (Kind.CREDIT, DOLLAR, "  ", "note"),
    ],
)
def test_an_operator_entry_with_a_bad_kind_amount_or_note_is_refused(
    owner, kind, amount, note, field
):
    with pytest.raises(Invalid) as refused:
        services.ledger_operator_entry(
            organization=owner.org, kind=kind, amount_micros=amount, note=note
        )
    assert refused.value.field == field
    assert LedgerEntry.objects.count() == 0


def test_an_operator_credit_is_audited(owner):
    entry = credit(owner.org, 5)
    event = AuditEvent.objects.get(action="billing.change", target=entry.pk)
    assert event.organization == owner.org
    assert event.metadata["amount_micros"] == 5 * DOLLAR


def test_dollars_convert_to_micros_exactly_and_bad_amounts_are_refused():
    assert usd_to_micros("0.50") == 500_000
    assert usd_to_micros(5.0) == 5 * DOLLAR
    assert usd_to_micros("$12.345678") == 12_345_678
    with pytest.raises(Invalid) as refused:
        usd_to_micros("lots", field="monthly_limit")
    assert refused.value.field == "monthly_limit"
    with pytest.raises(Invalid):
        usd_to_micros("nan")


# --- coupons ----------------------------------------------------------------------------------


def make_coupon(code="WELCOME25", dollars=25, limit=10, expires_at=None) -> Coupon:
    return Coupon.objects.create(
        code=code,
        amount_micros=usd_to_micros(dollars),
        redemption_limit=limit,
        expires_at=expires_at,
    )


def test_redeeming_a_coupon_adds_its_amount_once(owner):
    make_coupon()
    entry = services.coupon_redeem(organization=owner.org, code="welcome25", created_by=owner.user)
    assert (entry.kind, entry.amount_micros, entry.reference) == (
        "coupon",
        25 * DOLLAR,
        "WELCOME25",
    )
    assert selectors.balance(organization=owner.org) == 25 * DOLLAR
    with pytest.raises(Invalid) as again:
        services.coupon_redeem(organization=owner.org, code="WELCOME25")
    assert again.value.code == "redeemed"
    assert selectors.balance(organization=owner.org) == 25 * DOLLAR
    assert AuditEvent.objects.filter(action="billing.change", target="WELCOME25").count() == 1


def test_an_expired_unknown_or_used_up_coupon_is_refused(owner, outsider):
    make_coupon("OLD", expires_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(Invalid) as expired:
        services.coupon_redeem(organization=owner.org, code="OLD")
    assert expired.value.code == "expired"
    with pytest.raises(Invalid) as unknown:
        services.coupon_redeem(organization=owner.org, code="NOPE")
    assert unknown.value.code == "unknown"
    make_coupon("ONCE", limit=1)
    services.coupon_redeem(organization=outsider.org, code="ONCE")
    with pytest.raises(Invalid) as used_up:
        services.coupon_redeem(organization=owner.org, code="ONCE")
    assert used_up.value.code == "used_up"
    assert selectors.balance(organization=owner.org) == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_redemptions_by_one_organization_credit_it_exactly_once(owner):
    make_coupon(limit=100)
    done, refused, crashed = race(
        8, lambda i: services.coupon_redeem(organization=owner.org, code="WELCOME25")
    )
    assert crashed == []
    assert len(done) == 1 and refused == ["redeemed"] * 7
    assert selectors.balance(organization=owner.org) == 25 * DOLLAR
    assert CouponRedemption.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_redemptions_by_many_organizations_never_pass_the_limit():
    orgs = [
        core.user_signup(
            email=f"o{i}@example.com", password="correct-horse-9", organization_name=f"Org {i}"
        )
        .memberships.get()
        .organization
        for i in range(8)
    ]
    make_coupon(limit=3)
    done, refused, crashed = race(
        8, lambda i: services.coupon_redeem(organization=orgs[i], code="WELCOME25")
    )
    assert crashed == []
    assert len(done) == 3 and refused == ["used_up"] * 5
    assert CouponRedemption.objects.count() == 3
    assert LedgerEntry.objects.filter(kind=Kind.COUPON).count() == 3


# --- may this organization start a run that needs credits --------------------------------------


def test_a_credit_run_may_start_with_credits_or_with_pay_as_you_go(owner):
    assert services.may_start_credit_run(organization=owner.org) is False
    services.account_update(organization=owner.org, pay_as_you_go=True, by=owner.user)
    assert services.may_start_credit_run(organization=owner.org) is True
    services.account_update(organization=owner.org, pay_as_you_go=False, by=owner.user)
    credit(owner.org, 1)
    assert services.may_start_credit_run(organization=owner.org) is True
