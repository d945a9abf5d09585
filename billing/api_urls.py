"""The billing API, mounted under /api/v1/ by belvedir/urls.py."""

from django.urls import path

from billing import api

urlpatterns = [
    path("billing", api.BillingView.as_view(), name="api-billing"),
    path("billing/ledger", api.LedgerView.as_view(), name="api-billing-ledger"),
    path(
        "billing/coupons/redeem",
        api.CouponRedeemView.as_view(),
        name="api-billing-coupon-redeem",
    ),
]
