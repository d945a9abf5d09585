"""Organization Settings → Billing: balance, history, CSV, coupons, pay as you go."""

import csv
import io

import pytest

from billing import selectors
from billing.models import Coupon

pytestmark = pytest.mark.django_db
PAGE = "/settings/organization/billing/"


def test_the_billing_page_shows_the_balance_history_and_that_runs_are_not_billed(funded):
    page = funded.web.get(PAGE).content.decode()
    assert 'id="balance" data-micros="10000000">$10.00<' in page
    assert "welcome credit" in page
    assert "Benchmark runs are not billed" in page


def test_the_billing_page_shows_run_prices_when_the_operator_set_them(funded, settings):
    settings.BELVEDIR_RUN_PRICE_CPU_USD = 0.5
    settings.BELVEDIR_RUN_PRICE_GPU_USD = 5
    page = funded.web.get(PAGE).content.decode()
    assert "$0.50 a CPU run, $5.00 a GPU run" in page


def test_the_organization_page_links_to_billing(owner):
    assert PAGE in owner.web.get("/settings/organization/").content.decode()


def test_a_user_of_no_organization_gets_404(nobody):
    assert nobody.get(PAGE).status_code == 404
    assert nobody.post(PAGE + "coupons/redeem/", {"coupon-code": "X"}).status_code == 404


def test_an_outsider_sees_its_own_empty_ledger_not_the_owners(funded, outsider):
    page = outsider.web.get(PAGE).content.decode()
    assert "$0.00" in page and "welcome credit" not in page


def test_redeeming_a_coupon_redirects_and_htmx_gets_the_fragment(funded):
    response = funded.web.post(PAGE + "coupons/redeem/", {"coupon-code": "WELCOME25"})
    assert response.status_code == 303
    assert selectors.balance(organization=funded.org) == 35_000_000
    Coupon.objects.create(code="SECOND", amount_micros=5_000_000)
    fragment = funded.web.post(
        PAGE + "coupons/redeem/", {"coupon-code": "second"}, HTTP_HX_REQUEST="true"
    )
    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert body.lstrip().startswith('<section id="billing">')
    assert "Coupon SECOND redeemed: $5.00 added." in body


def test_a_bad_coupon_is_shown_on_the_form_with_400(funded):
    response = funded.web.post(
        PAGE + "coupons/redeem/", {"coupon-code": "NOPE"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert 'data-field="code"' in response.content.decode()
    assert "There is no coupon" in response.content.decode()


def test_a_read_only_member_sees_billing_but_cannot_redeem(funded, readonly):
    assert readonly.web.get(PAGE).status_code == 200
    response = readonly.web.post(PAGE + "coupons/redeem/", {"coupon-code": "WELCOME25"})
    assert response.status_code == 403
    assert selectors.balance(organization=funded.org) == 10_000_000


def test_an_owner_turns_on_pay_as_you_go_with_a_monthly_limit(owner):
    response = owner.web.post(
        PAGE + "pay-as-you-go/", {"payg-pay_as_you_go": "on", "payg-monthly_limit": "25.50"}
    )
    assert response.status_code == 303
    account = selectors.account_for(organization=owner.org)
    assert account.pay_as_you_go is True and account.monthly_limit_micros == 25_500_000


def test_members_cannot_change_pay_as_you_go(owner, member):
    response = member.web.post(
        PAGE + "pay-as-you-go/", {"payg-pay_as_you_go": "on", "payg-monthly_limit": "10"}
    )
    assert response.status_code == 403
    assert selectors.account_for(organization=owner.org).pay_as_you_go is False


def test_a_bad_monthly_limit_is_a_400_naming_the_field(owner):
    response = owner.web.post(
        PAGE + "pay-as-you-go/",
        {"payg-pay_as_you_go": "on", "payg-monthly_limit": "-3"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    assert 'data-field="monthly_limit"' in response.content.decode()
    assert selectors.account_for(organization=owner.org).pay_as_you_go is False


def test_the_history_paginates(funded):
    from billing.services import ledger_operator_entry

    for i in range(30):
        ledger_operator_entry(
            organization=funded.org, kind="credit", amount_micros=1, note=f"bonus {i}"
        )
    first = funded.web.get(PAGE).content.decode()
    assert "bonus 29" in first and "welcome credit" not in first
    assert "welcome credit" in funded.web.get(PAGE + "?page=2").content.decode()


def test_the_ledger_exports_as_csv_with_formulas_neutralized(funded):
    from billing.services import ledger_operator_entry

    ledger_operator_entry(
        organization=funded.org, kind="adjustment", amount_micros=-500_000, note="=HYPERLINK(1)"
    )
    response = funded.web.get(PAGE + "ledger.csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["kind"], r["amount_micros"], r["amount_usd"]) for r in rows] == [
        ("adjustment", "-500000", "-$0.50"),
        ("credit", "10000000", "$10.00"),
    ]
    assert rows[0]["reference"] == "'=HYPERLINK(1)"
