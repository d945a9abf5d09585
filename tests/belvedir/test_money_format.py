"""Money reads one way everywhere: the run page's covered spend, the router's refusal, the
billing page, the admin and the CLI all show micro-dollars through `belvedir.text.usd`."""

import pytest
from django.template import Context, Template

from belvedir.admin_mixins import usd_column
from belvedir.models import ApiKey
from belvedir.text import usd
from router.services import refused_reservation
from tests.router.helpers import make_run

pytestmark = pytest.mark.django_db

SPENT = 4_567  # $0.004567: a covered spend finer than a cent, as a few calls leave it
CAP = 2_000_000
ASKED = 12_300


def test_an_amount_shows_in_whole_cents_or_else_exactly_never_rounded():
    assert usd(2_000_000) == "$2.00"
    assert usd(12_300) == "$0.0123"
    assert usd(SPENT) == "$0.004567"
    assert usd(1_234_567_890) == "$1,234.56789"
    assert usd(-500_000) == "-$0.50"
    assert usd(0) == "$0.00"


def test_every_template_has_one_money_filter_without_loading_a_library():
    html = Template("{{ a|usd }} {{ b|usd }} {{ c|usd }}").render(
        Context({"a": SPENT, "b": None, "c": "not money"})
    )
    assert html == "$0.004567 $0.00 "


def test_the_run_page_and_the_routers_refusal_show_a_covered_spend_the_same_way(owner, harness):
    run = make_run(owner.project, harness, cap_micros=CAP, covered_spent_micros=SPENT)
    key = ApiKey.objects.get(pk=run.ingest_key_id)

    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    refusal = refused_reservation(key, run.pk, ASKED)

    assert "$0.004567 of $2.00" in page
    assert refusal.status == 402
    assert refusal.message == (
        "The run's covered spend cap of $2.00 is reached "
        "(spent $0.004567; this call may cost up to $0.0123)."
    )


def test_the_admins_money_columns_use_the_same_format():
    class Row:
        covered_spend = SPENT

    column = usd_column("covered_spend", "covered model spend (USD)")
    assert column(None, Row()) == "$0.004567"
