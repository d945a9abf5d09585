from django.urls import path

from billing import views

urlpatterns = [
    path("", views.billing_page, name="organization-billing"),
    path("ledger.csv", views.ledger_export, name="billing-ledger-export"),
    path("coupons/redeem/", views.coupon_redeem, name="billing-coupon-redeem"),
    path("pay-as-you-go/", views.pay_as_you_go, name="billing-pay-as-you-go"),
]
