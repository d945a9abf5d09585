"""Operators' billing: the ledger read-only (credits and debits through the service, in the add
form), coupons, and each organization's billing settings."""

from decimal import Decimal

from django import forms
from django.contrib import admin
from django.db.models import Count

from belvedir.admin_mixins import ReadOnlyAdminMixin, usd_column
from belvedir.errors import DomainError
from billing import services
from billing.models import (
    MICROS_PER_USD,
    BillingAccount,
    Coupon,
    CouponRedemption,
    LedgerEntry,
)
from billing.money import usd_to_micros


class OperatorEntryForm(forms.ModelForm):
    """A credit or an adjustment, in dollars; saved by `ledger_operator_entry`."""

    kind = forms.ChoiceField(choices=[(k.value, k.label) for k in services.OPERATOR_KINDS])
    amount_usd = forms.DecimalField(
        label="Amount (USD)",
        decimal_places=6,
        help_text="Positive adds money; an adjustment may be negative (a debit).",
    )
    note = forms.CharField(max_length=200, help_text="What it is for (shown to the organization).")

    class Meta:
        model = LedgerEntry
        fields = ["organization"]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self.entry_args = {
                "organization": data["organization"],
                "kind": data["kind"],
                "amount_micros": usd_to_micros(data["amount_usd"], field="amount_usd"),
                "note": data["note"],
            }
            services.operator_entry_check(
                kind=data["kind"],
                amount_micros=self.entry_args["amount_micros"],
                note=data["note"],
            )
        except DomainError as exc:
            field = {"amount": "amount_usd"}.get(exc.field, exc.field)
            raise forms.ValidationError({field or "amount_usd": exc.message}) from None
        return data


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    list_display = ["id", "organization", "kind", "shown_amount", "reference", "created_at"]
    list_filter = ["kind", "organization"]
    search_fields = ["id", "reference", "organization__name", "organization__id"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "id",
        "organization",
        "kind",
        "amount_micros",
        "reference",
        "created_by",
        "created_at",
    ]

    shown_amount = usd_column("amount_micros", "amount")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = OperatorEntryForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["organization", "kind", "amount_usd", "note"]
        return self.readonly_fields

    def save_model(self, request, obj, form, change):
        """Appended by the service (which audits it), never saved here."""
        entry = services.ledger_operator_entry(**form.entry_args, created_by=request.user)
        obj.__dict__.update({f.attname: getattr(entry, f.attname) for f in entry._meta.fields})
        obj._state.adding = False

    def has_change_permission(self, request, obj=None):
        return False  # append-only: a mistake is corrected by another entry

    def has_delete_permission(self, request, obj=None):
        return False


class CouponForm(forms.ModelForm):
    amount_usd = forms.DecimalField(
        label="Amount (USD)", min_value=Decimal("0.01"), decimal_places=6
    )

    class Meta:
        model = Coupon
        fields = ["code", "amount_usd", "expires_at", "redemption_limit"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            self.fields["amount_usd"].initial = (
                Decimal(self.instance.amount_micros) / MICROS_PER_USD
            )

    def clean_code(self):
        code = self.cleaned_data["code"].strip()
        if Coupon.objects.filter(code__iexact=code).exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError("A coupon with this code exists.")
        return code

    def save(self, commit=True):
        self.instance.amount_micros = usd_to_micros(self.cleaned_data["amount_usd"])
        return super().save(commit)


class RedemptionInline(admin.TabularInline):
    model = CouponRedemption
    fields = ["organization", "entry", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Coupon)
class CouponAdmin(admin.ModelAdmin):
    form = CouponForm
    list_display = ["code", "shown_amount", "expires_at", "redeemed", "redemption_limit"]
    search_fields = ["code"]
    inlines = [RedemptionInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(redeemed_count=Count("redemptions"))

    shown_amount = usd_column("amount_micros", "amount")

    @admin.display(description="redeemed", ordering="redeemed_count")
    def redeemed(self, coupon: Coupon) -> int:
        return coupon.redeemed_count

    def has_delete_permission(self, request, obj=None):
        # A redeemed coupon stays: its redemptions point at it.
        return obj is None or not obj.redemptions.exists()


@admin.register(BillingAccount)
class BillingAccountAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: owners choose pay as you go; it is audited through the service."""

    list_display = ["organization", "pay_as_you_go", "shown_limit", "updated_at"]
    list_filter = ["pay_as_you_go"]
    search_fields = ["organization__name", "organization__id"]
    readonly_fields = ["organization", "pay_as_you_go", "monthly_limit_micros", "updated_at"]

    shown_limit = usd_column("monthly_limit_micros", "monthly limit")


@admin.register(CouponRedemption)
class CouponRedemptionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Who redeemed what: written by `coupon_redeem` only."""

    list_display = ["coupon", "organization", "entry", "created_at"]
    list_filter = ["coupon"]
    search_fields = ["coupon__code", "organization__name", "organization__id"]
    readonly_fields = ["coupon", "organization", "entry", "created_at"]
