from decimal import Decimal

from django import forms


class CouponForm(forms.Form):
    code = forms.CharField(max_length=64, label="Coupon code")


class PayAsYouGoForm(forms.Form):
    pay_as_you_go = forms.BooleanField(required=False, label="Pay as you go")
    monthly_limit = forms.DecimalField(
        label="Monthly limit (USD)",
        min_value=Decimal("0"),
        max_value=Decimal("1000000"),
        decimal_places=2,
    )
