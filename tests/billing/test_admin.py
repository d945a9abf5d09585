"""Operators' billing in the admin: credits and debits through the service, the ledger read-only,
coupons in dollars; what only services write is read-only, money shown exactly."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.test import RequestFactory
from django.urls import reverse

from belvedir.models import AuditEvent
from billing import selectors
from billing.models import BillingAccount, Coupon, CouponRedemption, LedgerEntry
from runs.models import OrganizationSpend

pytestmark = pytest.mark.django_db
ADD = "/admin/billing/ledgerentry/add/"


def test_an_operator_credits_and_debits_an_organization_through_the_admin(superuser, owner):
    for kind, amount, note in [("credit", "20", "pilot"), ("adjustment", "-2.5", "refund fix")]:
        response = superuser.post(
            ADD,
            {"organization": owner.org.pk, "kind": kind, "amount_usd": amount, "note": note},
        )
        assert response.status_code == 302, response.content.decode()[:2000]
    assert selectors.balance(organization=owner.org) == 17_500_000
    entry = LedgerEntry.objects.get(kind="credit")
    assert (entry.reference, entry.created_by) == ("pilot", superuser.user)
    assert AuditEvent.objects.filter(action="billing.change", organization=owner.org).count() == 2


def test_a_negative_credit_is_refused_on_the_admin_form(superuser, owner):
    response = superuser.post(
        ADD, {"organization": owner.org.pk, "kind": "credit", "amount_usd": "-5", "note": "x"}
    )
    assert response.status_code == 200
    assert "use an adjustment" in response.content.decode()
    assert LedgerEntry.objects.count() == 0


def test_ledger_entries_cannot_be_changed_or_deleted_in_the_admin(superuser, funded):
    entry = LedgerEntry.objects.get(organization=funded.org)
    url = f"/admin/billing/ledgerentry/{quote(entry.pk)}/"  # the admin reads "_XX" as an escape
    page = superuser.get(url + "change/")
    assert page.status_code == 200, page.content.decode()[:2000]
    assert 'name="_save"' not in page.content.decode()
    deleting = superuser.get(url + "delete/")
    assert deleting.status_code == 403, deleting.content.decode()[:2000]
    changing = superuser.post(url + "change/", {"amount_micros": 1})
    assert changing.status_code == 403, changing.content.decode()[:2000]
    entry.refresh_from_db()
    assert entry.amount_micros == 10_000_000


def test_an_operator_makes_a_coupon_in_dollars(superuser, owner):
    response = superuser.post(
        "/admin/billing/coupon/add/",
        {
            "code": "LAUNCH10",
            "amount_usd": "10.00",
            "redemption_limit": "50",
            "redemptions-TOTAL_FORMS": "0",
            "redemptions-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    coupon = Coupon.objects.get(code="LAUNCH10")
    assert (coupon.amount_micros, coupon.redemption_limit) == (10_000_000, 50)
    assert superuser.get("/admin/billing/coupon/").status_code == 200


def test_money_columns_show_exact_dollars_and_sort_by_the_micro_dollars(superuser, funded):
    Coupon.objects.create(code="TINY", amount_micros=15_000, redemption_limit=1)
    listing = superuser.get("/admin/billing/coupon/", {"o": "2"})  # by the amount column
    html = listing.content.decode()
    assert "$0.015" in html and "$25.00" in html  # never rounded to cents
    assert html.index("TINY") < html.index("WELCOME25")
    assert "$10.00" in superuser.get("/admin/billing/ledgerentry/").content.decode()


@pytest.mark.parametrize(
    "model", [BillingAccount, CouponRedemption, AuditEvent, OrganizationSpend], ids=str
)
def test_rows_only_services_write_are_read_only_in_the_admin(superuser, funded, model):
    request = RequestFactory().get("/admin/")
    request.user = superuser.user
    model_admin = admin.site._registry[model]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    add = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
    assert superuser.get(add).status_code == 403
