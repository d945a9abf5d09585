import pytest

from billing.models import Coupon, Kind
from billing.services import ledger_operator_entry


@pytest.fixture
def funded(owner):
    """The owner's organization with $10 of credit and a $25 coupon to redeem."""
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=10_000_000, note="welcome credit"
    )
    Coupon.objects.create(code="WELCOME25", amount_micros=25_000_000, redemption_limit=10)
    return owner


@pytest.fixture
def nobody(db, client_factory):
    """A signed-in user who belongs to no organization."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(
        username="nobody@example.com", email="nobody@example.com", password="correct-horse-9"
    )
    web = client_factory()
    web.force_login(user)
    return web
