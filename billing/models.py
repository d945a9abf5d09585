"""The money of an organization: an append-only ledger in integer micro-dollars, its billing
settings, and the coupons operators make.

The balance is the sum of the ledger (`billing.selectors.balance`), never a stored counter.
Entries are written only by `billing.services`; nothing updates or deletes them.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from belvedir import ids
from belvedir.models import Organization

MICROS_PER_USD = 1_000_000


def entry_id() -> str:
    return ids.make_id("led")


def coupon_id() -> str:
    return ids.make_id("cpn")


class Kind(models.TextChoices):
    CREDIT = "credit", "Credit"
    CHARGE = "charge", "Charge"
    REFUND = "refund", "Refund"
    COUPON = "coupon", "Coupon"
    ADJUSTMENT = "adjustment", "Adjustment"


class LedgerEntry(models.Model):
    """One movement of money, signed: credits, coupons and refunds add, charges take."""

    id = models.CharField(primary_key=True, max_length=32, default=entry_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="ledger_entries"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    amount_micros = models.BigIntegerField()
    # What it is for: a run's public id (`run_…`), a coupon code, an operator's note.
    reference = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "ledger entries"
        indexes = [
            models.Index(
                fields=["organization", "-created_at", "-id"], name="ledger_organization_newest"
            )
        ]
        constraints = [
            # A run is charged once and refunded once, whatever retries happen.
            models.UniqueConstraint(
                fields=["organization", "kind", "reference"],
                condition=Q(kind__in=["charge", "refund"]),
                name="one_charge_and_one_refund_per_reference",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=["credit", "coupon", "refund"], amount_micros__gt=0)
                | Q(kind="charge", amount_micros__lt=0)
                | Q(kind="adjustment"),
                name="ledger_amount_sign_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.organization} {self.kind} {self.amount_micros / MICROS_PER_USD:+.2f} USD"


class BillingAccount(models.Model):
    """An organization's billing settings; absent means the defaults (pay as you go off)."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="billing_account"
    )
    pay_as_you_go = models.BooleanField(default=False)
    # With pay as you go on: the most run charges (net of refunds) a calendar month may hold
    # once the balance no longer covers a launch.
    monthly_limit_micros = models.BigIntegerField(default=100 * MICROS_PER_USD)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(monthly_limit_micros__gte=0), name="monthly_limit_not_negative"
            )
        ]

    def __str__(self) -> str:
        return f"Billing of {self.organization}"


class Coupon(models.Model):
    """A code operators make: worth `amount_micros`, redeemable once per organization, by at
    most `redemption_limit` organizations, until `expires_at`."""

    id = models.CharField(primary_key=True, max_length=32, default=coupon_id, editable=False)
    code = models.CharField(max_length=64, unique=True)
    amount_micros = models.BigIntegerField()
    expires_at = models.DateTimeField(null=True, blank=True)
    redemption_limit = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Codes are redeemed whatever their case, so no two may differ only by case.
            models.UniqueConstraint(Lower("code"), name="coupon_code_unique_any_case"),
            models.CheckConstraint(condition=Q(amount_micros__gt=0), name="coupon_amount_positive"),
            models.CheckConstraint(
                condition=Q(redemption_limit__gte=1), name="coupon_redemption_limit_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.code


class CouponRedemption(models.Model):
    coupon = models.ForeignKey(Coupon, on_delete=models.PROTECT, related_name="redemptions")
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="coupon_redemptions"
    )
    entry = models.OneToOneField(LedgerEntry, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["coupon", "organization"], name="one_redemption_per_organization"
            )
        ]

    def __str__(self) -> str:
        return f"{self.coupon} by {self.organization}"


class SpendCapped(models.Model):
    """What spends platform money on model usage under a cap (a covered run, a covered
    environment generation), in integer micro-dollars: reserved is held by calls in flight,
    spent is settled; reserved + spent never passes the cap (`billing.spend`). Calls reserve
    only while the row's `status` is "running" and it is `covered`.

    A call is charged at most what it reserved: what the upstream reported past that is the
    excess (`covered_excess_micros` over `covered_excess_calls` calls), which the platform
    may have been billed but the cap never counts: the operator's "upstream reported more
    than reserved"."""

    covered = models.BooleanField(default=False)
    covered_cap_micros = models.BigIntegerField(default=0)
    covered_reserved_micros = models.BigIntegerField(default=0)
    covered_spent_micros = models.BigIntegerField(default=0)
    covered_excess_micros = models.BigIntegerField(
        default=0, help_text="What the upstream reported past the calls' reservations."
    )
    covered_excess_calls = models.IntegerField(
        default=0, help_text="Calls whose upstream reported more than was reserved."
    )

    class Meta:
        abstract = True
