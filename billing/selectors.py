"""Billing reads: the balance is the sum of the ledger, computed, never stored."""

from datetime import datetime

from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet, Sum
from django.utils import timezone

from belvedir.models import Membership, Organization
from billing.models import BillingAccount, Kind, LedgerEntry
from billing.money import usd_to_micros


def balance(*, organization: Organization) -> int:
    """The organization's balance in micro-dollars: the sum of its ledger entries."""
    total = LedgerEntry.objects.filter(organization=organization).aggregate(
        total=Sum("amount_micros")
    )["total"]
    return int(total or 0)


def ledger_for(*, organization: Organization) -> QuerySet[LedgerEntry]:
    """The organization's entries, newest first; `by_member`: made by one of its members."""
    return (
        LedgerEntry.objects.filter(organization=organization)
        .select_related("created_by")
        .annotate(
            by_member=Exists(
                Membership.objects.filter(organization=organization, user=OuterRef("created_by"))
            )
        )
    )


OPERATOR_NAME = "Belvedir"


def entry_author(entry: LedgerEntry) -> str:
    """Who made an entry, as the organization sees it: a member's email; "Belvedir" for an
    operator's (their staff's addresses are not the customer's to read); "" for the system's."""
    if entry.created_by_id is None:
        return ""
    by_member = getattr(entry, "by_member", None)
    if by_member is None:
        by_member = Membership.objects.filter(
            organization_id=entry.organization_id, user_id=entry.created_by_id
        ).exists()
    return entry.created_by.email if by_member else OPERATOR_NAME


def account_for(*, organization: Organization) -> BillingAccount:
    """The organization's billing settings (the defaults, unsaved, when it never changed them)."""
    account = BillingAccount.objects.filter(organization=organization).first()
    return account or BillingAccount(organization=organization)


def month_start(now: datetime | None = None) -> datetime:
    now = timezone.localtime(now or timezone.now())
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_run_spend(*, organization: Organization) -> int:
    """This calendar month's run charges net of their own refunds (positive). A refund counts
    toward the month of the charge it gives back: one of last month's charges refunded now
    does not make room in this month."""
    entries = LedgerEntry.objects.filter(organization=organization)
    charges = entries.filter(kind=Kind.CHARGE, created_at__gte=month_start())
    total = (
        entries.filter(kind=Kind.REFUND, reference__in=charges.values("reference")) | charges
    ).aggregate(total=Sum("amount_micros"))["total"]
    return max(0, -int(total or 0))


def run_price(*, gpu: bool) -> int:
    """What launching a run costs, in micro-dollars (0: runs are not billed)."""
    usd = settings.BELVEDIR_RUN_PRICE_GPU_USD if gpu else settings.BELVEDIR_RUN_PRICE_CPU_USD
    return usd_to_micros(usd)


def task_sandbox_price_per_minute() -> int:
    """What a minute of a managed Harbor task sandbox costs, in micro-dollars (0: free)."""
    return usd_to_micros(settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD)
