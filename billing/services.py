"""Billing writes: every ledger entry, coupon redemption and billing setting goes through here.

Entries are appended, never changed. Run pricing: `run_charge` inside the launch's transaction
(the caller holds the organization's row lock), `run_refund` when the sandbox never launched.
"""

from django.db import IntegrityError, transaction
from django.utils import timezone

from belvedir import audit
from belvedir.errors import Invalid, PaymentRequired
from belvedir.models import Organization
from billing import selectors
from billing.models import BillingAccount, Coupon, CouponRedemption, Kind, LedgerEntry
from billing.money import usd

OPERATOR_KINDS = (Kind.CREDIT, Kind.ADJUSTMENT)
MAX_AMOUNT_MICROS = 10**15  # a billion dollars: anything bigger is a typo


def _entry_create(
    *, organization: Organization, kind: str, amount_micros: int, reference: str, created_by=None
) -> LedgerEntry:
    return LedgerEntry.objects.create(
        organization=organization,
        kind=kind,
        amount_micros=amount_micros,
        reference=reference[:200],
        created_by=created_by if getattr(created_by, "pk", None) else None,
    )


def operator_entry_check(*, kind: str, amount_micros: int, note: str) -> None:
    """Invalid unless this is an entry an operator may add (the admin form asks first)."""
    if kind not in OPERATOR_KINDS:
        raise Invalid("Operators add credits or adjustments.", field="kind")
    if not amount_micros or abs(amount_micros) > MAX_AMOUNT_MICROS:
        raise Invalid("The amount must not be zero (nor over a billion dollars).", field="amount")
    if kind == Kind.CREDIT and amount_micros < 0:
        raise Invalid("A credit adds money; use an adjustment to take it away.", field="amount")
    if not note.strip():
        raise Invalid("Say what the entry is for.", field="note")


def ledger_operator_entry(
    *, organization: Organization, kind: str, amount_micros: int, note: str, created_by=None
) -> LedgerEntry:
    """An operator's credit (positive) or adjustment (either sign, a debit when negative)."""
    operator_entry_check(kind=kind, amount_micros=amount_micros, note=note)
    with transaction.atomic():
        entry = _entry_create(
            organization=organization,
            kind=kind,
            amount_micros=amount_micros,
            reference=note.strip(),
            created_by=created_by,
        )
        audit.audit_record(
            action=audit.BILLING_CHANGE,
            organization=organization,
            target=entry.pk,
            metadata={"kind": kind, "amount_micros": amount_micros, "note": note.strip()[:200]},
            actor=created_by,
        )
    return entry


def coupon_redeem(*, organization: Organization, code: str, created_by=None) -> LedgerEntry:
    """Add a coupon's amount to the organization: once per organization, never past the
    coupon's redemption limit (counted under a row lock on the coupon)."""
    code = (code or "").strip()
    if not code:
        raise Invalid("Enter a coupon code.", field="code")
    with transaction.atomic():
        coupon = Coupon.objects.select_for_update().filter(code__iexact=code).first()
        if coupon is None:
            raise Invalid(f"There is no coupon {code!r}.", field="code", code="unknown")
        if coupon.expires_at is not None and coupon.expires_at <= timezone.now():
            raise Invalid(f"The coupon {coupon.code} has expired.", field="code", code="expired")
        if CouponRedemption.objects.filter(coupon=coupon, organization=organization).exists():
            raise Invalid(
                f"Your organization has already redeemed {coupon.code}.",
                field="code",
                code="redeemed",
            )
        if CouponRedemption.objects.filter(coupon=coupon).count() >= coupon.redemption_limit:
            raise Invalid(
                f"The coupon {coupon.code} has been used up.", field="code", code="used_up"
            )
        entry = _entry_create(
            organization=organization,
            kind=Kind.COUPON,
            amount_micros=coupon.amount_micros,
            reference=coupon.code,
            created_by=created_by,
        )
        try:
            with transaction.atomic():
                CouponRedemption.objects.create(
                    coupon=coupon, organization=organization, entry=entry
                )
        except IntegrityError:  # the constraint behind the check above
            raise Invalid(
                f"Your organization has already redeemed {coupon.code}.",
                field="code",
                code="redeemed",
            ) from None
        audit.audit_record(
            action=audit.BILLING_CHANGE,
            organization=organization,
            target=coupon.code,
            metadata={"coupon": coupon.code, "amount_micros": coupon.amount_micros},
            actor=created_by,
        )
    return entry


def account_update(
    *,
    organization: Organization,
    pay_as_you_go: bool | None = None,
    monthly_limit_micros: int | None = None,
    by=None,
) -> BillingAccount:
    """Change pay as you go and its monthly limit (callers check the caller is an owner)."""
    if monthly_limit_micros is not None and not 0 <= monthly_limit_micros <= MAX_AMOUNT_MICROS:
        raise Invalid("The monthly limit must be 0 or more US dollars.", field="monthly_limit")
    with transaction.atomic():
        account, _ = BillingAccount.objects.select_for_update().get_or_create(
            organization=organization
        )
        before = {
            "pay_as_you_go": account.pay_as_you_go,
            "monthly_limit_micros": account.monthly_limit_micros,
        }
        if pay_as_you_go is not None:
            account.pay_as_you_go = pay_as_you_go
        if monthly_limit_micros is not None:
            account.monthly_limit_micros = monthly_limit_micros
        after = {
            "pay_as_you_go": account.pay_as_you_go,
            "monthly_limit_micros": account.monthly_limit_micros,
        }
        if after != before:
            account.updated_at = timezone.now()
            account.save()
            audit.audit_record(
                action=audit.BILLING_CHANGE,
                organization=organization,
                target="pay_as_you_go",
                metadata={"before": before, "after": after},
                actor=by,
            )
    return account


def run_charge(
    *, organization: Organization, reference: str, gpu: bool, created_by=None
) -> LedgerEntry | None:
    """Charge a run's price at launch; None when runs are free.

    Call inside the launch's transaction holding the organization's row lock, so concurrent
    launches see each other's charges. Refuses (PaymentRequired, naming the balance) what the
    balance cannot pay, unless pay as you go is on and the month stays within its limit.
    """
    price = selectors.run_price(gpu=gpu)
    if price <= 0:
        return None
    balance = selectors.balance(organization=organization)
    if balance < price:
        account = selectors.account_for(organization=organization)
        kind = "GPU" if gpu else "CPU"
        if not account.pay_as_you_go:
            raise PaymentRequired(
                f"A {kind} run costs {usd(price)} and your organization's balance is "
                f"{usd(balance)}. Add credits or redeem a coupon, or have an owner turn on "
                "pay as you go, under Organization Settings → Billing.",
                code="balance",
            )
        spent = selectors.month_run_spend(organization=organization)
        if spent + price > account.monthly_limit_micros:
            raise PaymentRequired(
                f"A {kind} run costs {usd(price)}; your organization's balance is {usd(balance)} "
                f"and runs this month already cost {usd(spent)} of the pay-as-you-go limit of "
                f"{usd(account.monthly_limit_micros)}. An owner can raise the limit under "
                "Organization Settings → Billing.",
                code="monthly_limit",
            )
    return _entry_create(
        organization=organization,
        kind=Kind.CHARGE,
        amount_micros=-price,
        reference=reference,
        created_by=created_by,
    )


def run_refund(*, organization_id: str, reference: str) -> LedgerEntry | None:
    """Give back a run's charge (its sandbox never launched). Idempotent by reference: a run
    with no charge, or already refunded, gets nothing."""
    with transaction.atomic():
        charge = (
            LedgerEntry.objects.select_for_update()
            .filter(organization_id=organization_id, kind=Kind.CHARGE, reference=reference)
            .first()
        )
        if charge is None:
            return None
        if LedgerEntry.objects.filter(
            organization_id=organization_id, kind=Kind.REFUND, reference=reference
        ).exists():
            return None
        return LedgerEntry.objects.create(
            organization_id=organization_id,
            kind=Kind.REFUND,
            amount_micros=-charge.amount_micros,
            reference=reference,
        )


def may_start_credit_run(*, organization: Organization) -> bool:
    """Whether the organization may start a run that needs credits (managed Harbor):
    it holds credits, or pay as you go is on and this month's runs are under its limit."""
    if selectors.balance(organization=organization) > 0:
        return True
    account = selectors.account_for(organization=organization)
    return account.pay_as_you_go and (
        selectors.month_run_spend(organization=organization) < account.monthly_limit_micros
    )


def usage_charge(*, organization_id: str, reference: str, amount_micros: int) -> LedgerEntry | None:
    """Charge metered usage (a managed Harbor task sandbox's minutes) once per reference:
    a second call with the same reference charges nothing and returns None. The balance may
    go below zero: the time was used; new usage is refused by `may_start_credit_run`."""
    if amount_micros <= 0:
        return None
    try:
        with transaction.atomic():
            return LedgerEntry.objects.create(
                organization_id=organization_id,
                kind=Kind.CHARGE,
                amount_micros=-amount_micros,
                reference=reference[:200],
            )
    except IntegrityError:  # one charge per reference: already settled
        return None
