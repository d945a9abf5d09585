"""Who pays for task sandboxes: an organization starts one only with credits left, counting
the time its running ones have used and not yet been charged, or under pay as you go below
its monthly limit (billing's rules); one out of credits gets its run ended."""

from __future__ import annotations

import math

from django.utils import timezone

from belvedir.errors import PaymentRequired
from billing import selectors as billing_selectors
from billing import services as billing
from billing.money import usd
from harbor.models import TaskSandbox
from runs.models import Run, Status
from runs.services import run_finish

OUT_OF_CREDITS = (
    "belvedir: the organization ran out of credits for task sandboxes (balance {balance}, pay "
    "as you go off or at its monthly limit), so the run was ended; add credits or turn on pay "
    "as you go under Organization Settings → Billing."
)


def running_micros(organization_id: str) -> int:
    """What the organization's running task sandboxes have used so far and not yet been
    charged (each is charged when it stops), per started minute."""
    price = billing_selectors.task_sandbox_price_per_minute()
    if not price:
        return 0
    now = timezone.now()
    started = TaskSandbox.objects.filter(
        run__project__organization_id=organization_id,
        status=TaskSandbox.Status.RUNNING,
        started_at__isnull=False,
    ).values_list("started_at", flat=True)
    return sum(max(1, math.ceil((now - at).total_seconds() / 60)) * price for at in started)


def _has_credits(org) -> tuple[bool, int]:
    """Whether the organization may start one more task sandbox, counting the time its
    running ones have used (not yet charged); and its balance net of that time."""
    balance = billing_selectors.balance(organization=org)
    if not billing.may_start_credit_run(organization=org):
        return False, balance
    running = running_micros(org.pk)
    if not running or balance - running > 0:
        return True, balance - running
    account = billing_selectors.account_for(organization=org)
    spent = billing_selectors.month_run_spend(organization=org) + running
    return account.pay_as_you_go and spent < account.monthly_limit_micros, balance - running


def require_credits(run: Run) -> None:
    """Out of credits without pay as you go (counting the time of the task sandboxes still
    running): refuse, and end the run with a note (its end stops its task sandboxes:
    harbor/hooks.py)."""
    org = run.project.organization
    enough, left = _has_credits(org)
    if enough:
        return
    balance = usd(left)
    note = OUT_OF_CREDITS.format(balance=balance)
    run_finish(
        run_id=run.pk,
        status=Status.FAILED,
        notes=[*run.notes, note],
        log_tail=f"{run.log_tail}\n{note}\n",
        log_size=run.log_size + len(note) + 2,
    )
    raise PaymentRequired(
        f"Your organization's balance is {balance} and pay as you go is off (or at its monthly "
        "limit): no new task sandboxes; the run was ended.",
        code="balance",
    )
