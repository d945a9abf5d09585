"""The spend cap (billing/spend.py): a call is charged at most what it reserved, and a spender
whose cap is reached admits nothing more, whatever it costs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from billing.spend import Charge, spend_reserve, spend_settle
from runs.models import Run
from tests.router.helpers import make_run

MICROS = st.integers(min_value=-(10**12), max_value=10**12)


@given(reserved=st.integers(min_value=0, max_value=10**12), cost=MICROS)
def test_a_charge_is_at_most_its_reservation_and_the_rest_is_its_excess(reserved, cost):
    charge = Charge("r", reserved, cost)
    assert 0 <= charge.charged_micros <= reserved
    assert charge.charged_micros + charge.excess_micros == max(cost, 0)
    assert charge.excess_micros == max(cost - reserved, 0)


@pytest.mark.django_db
def test_a_run_whose_cap_is_reached_reserves_nothing_more_not_even_a_free_call(owner, harness):
    run = make_run(owner.project, harness, cap_micros=100)
    assert spend_reserve(account=Run, account_id=run.pk, amount=100)
    spend_settle(account=Run, charges=[Charge(run.pk, 100, 10**6)])

    run.refresh_from_db()
    assert (run.covered_spent_micros, run.covered_reserved_micros) == (100, 0)
    assert (run.covered_excess_micros, run.covered_excess_calls) == (10**6 - 100, 1)
    assert not spend_reserve(account=Run, account_id=run.pk, amount=1)
    assert not spend_reserve(account=Run, account_id=run.pk, amount=0)
