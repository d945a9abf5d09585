"""`belvedir billing` and `belvedir billing redeem CODE` over the REST API."""

import json

import pytest

from billing.models import Kind
from billing.services import ledger_operator_entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_belvedir_billing_shows_the_balance_and_the_ledger(cli, funded):
    code, out, err = cli("billing")
    assert code == 0, err
    assert "balance       $10.00" in out
    assert "pay as you go off" in out
    assert "benchmark runs are not billed" in out
    assert "welcome credit" in out


def test_belvedir_billing_redeem_adds_the_coupon(cli, funded):
    code, out, err = cli("billing", "redeem", "WELCOME25")
    assert code == 0, err
    assert "redeemed WELCOME25: $25.00 added; balance $35.00" in out
    code, out, _ = cli("billing", "--json")
    assert json.loads(out)["balance_micros"] == 35_000_000


def test_a_coupon_redeemed_twice_exits_1_with_the_reason(cli, funded):
    cli("billing", "redeem", "WELCOME25")
    code, _, err = cli("billing", "redeem", "WELCOME25")
    assert code == 1
    assert "already redeemed" in err


def test_belvedir_billing_shows_a_fraction_of_a_cent_exactly(cli, funded):
    ledger_operator_entry(
        organization=funded.org, kind=Kind.ADJUSTMENT, amount_micros=-4_000, note="rounding"
    )
    code, out, err = cli("billing")
    assert code == 0, err
    assert "balance       $9.996" in out  # not rounded to $10.00
    assert "-$0.004" in out
