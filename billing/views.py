"""Organization Settings → Billing: balance, history, coupons, pay as you go. One action per URL;
a plain form is redirected after success (303), an HTMX form gets the page's `billing` partial."""

import csv

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST, require_safe

from belvedir.access import access_for_request
from belvedir.error_responses import form_status, form_submit
from belvedir.http import see_other
from billing import selectors, services
from billing.forms import CouponForm, PayAsYouGoForm
from billing.models import MICROS_PER_USD
from billing.money import usd, usd_to_micros

PAGE_SIZE = 25


def _context(request, access, *, coupon_form=None, payg_form=None) -> dict:
    organization = access.organization
    account = selectors.account_for(organization=organization)
    entries = selectors.ledger_for(organization=organization)
    return {
        "balance": selectors.balance(organization=organization),
        "account": account,
        "month_spend": selectors.month_run_spend(organization=organization),
        "price_cpu": selectors.run_price(gpu=False),
        "price_gpu": selectors.run_price(gpu=True),
        "price_task_minute": selectors.task_sandbox_price_per_minute(),
        "page": Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page")),
        "coupon_form": coupon_form or CouponForm(prefix="coupon"),
        "payg_form": payg_form
        or PayAsYouGoForm(
            prefix="payg",
            initial={
                "pay_as_you_go": account.pay_as_you_go,
                "monthly_limit": account.monthly_limit_micros / MICROS_PER_USD,
            },
        ),
        "is_owner": access.role == "owner",
    }


def _page(request, access, status=200, **forms):
    template = "billing/billing.html#billing" if request.htmx else "billing/billing.html"
    return render(request, template, _context(request, access, **forms), status=status)


@login_required
@require_safe
def billing_page(request):
    return _page(request, access_for_request(request))


@login_required
@require_safe
def ledger_export(request):
    """The whole ledger as CSV, newest first (amounts in micro-dollars and in dollars)."""
    access = access_for_request(request)
    entries = selectors.ledger_for(organization=access.organization).iterator()

    def rows():
        writer = csv.writer(_Echo())
        yield writer.writerow(
            ["id", "created_at", "kind", "amount_micros", "amount_usd", "reference", "by"]
        )
        for e in entries:
            yield writer.writerow(
                [
                    e.id,
                    e.created_at.isoformat(),
                    e.kind,
                    e.amount_micros,
                    usd(e.amount_micros),
                    _cell(e.reference),
                    selectors.entry_author(e),
                ]
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="belvedir-ledger.csv"'
    return response


class _Echo:
    def write(self, value: str) -> str:
        return value


def _cell(text: str) -> str:
    """No spreadsheet formula from a reference someone typed."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@login_required
@require_POST
def coupon_redeem(request):
    access = access_for_request(request)
    access.require_write()
    form = CouponForm(request.POST, prefix="coupon")
    entry = form_submit(
        form,
        lambda data: services.coupon_redeem(
            organization=access.organization, code=data["code"], created_by=request.user
        ),
    )
    if entry is not None:
        messages.success(
            request, f"Coupon {entry.reference} redeemed: {usd(entry.amount_micros)} added."
        )
        return _page(request, access) if request.htmx else see_other("organization-billing")
    return _page(request, access, status=form_status(form), coupon_form=form)


@login_required
@require_POST
def pay_as_you_go(request):
    access = access_for_request(request)
    access.require_owner()
    form = PayAsYouGoForm(request.POST, prefix="payg")
    account = form_submit(
        form,
        lambda data: services.account_update(
            organization=access.organization,
            pay_as_you_go=data["pay_as_you_go"],
            monthly_limit_micros=usd_to_micros(data["monthly_limit"], field="monthly_limit"),
            by=request.user,
        ),
    )
    if account is not None:
        state = "on" if account.pay_as_you_go else "off"
        messages.success(
            request, f"Pay as you go is {state}; monthly limit {usd(account.monthly_limit_micros)}."
        )
        return _page(request, access) if request.htmx else see_other("organization-billing")
    return _page(request, access, status=form_status(form), payg_form=form)
