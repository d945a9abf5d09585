"""The log-in lockout (django-axes' database handler, settings' AXES_HANDLER), counted two ways:

- per account and address: `AXES_FAILURE_LIMIT` failures of one account from one address lock
  that address out of the account for `AXES_COOLOFF_TIME` (django-axes as configured);
- per account: `BELVEDIR_ACCOUNT_LOCKOUT_LIMIT` failures of one account from any addresses
  within the same cool-off lock the account against every address that has not signed in to
  it (successfully, in the last `KNOWN_ADDRESS_DAYS` days), so guessing from many addresses
  stops there too.

The per-account limit is higher than the per-address one, lifts once the failures are a cool-off
old, and never holds an address the account's owner has signed in from: an attacker who fails on
purpose can keep a victim from signing in from new addresses while the attack lasts, never from
the ones the victim uses. The address is REMOTE_ADDR, which uvicorn sets from X-Forwarded-For
only for the proxies in BELVEDIR_FORWARDED_ALLOW_IPS (scripts/serve.sh), so a spoofed header
neither spreads guesses over made-up addresses nor counts them against a victim's address.
"""

from datetime import timedelta

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

KNOWN_ADDRESS_DAYS = 90


def _account_failures(username: str, request) -> int:
    """The account's failed log-ins from every address within the cool-off."""
    attempts = AccessAttempt.objects.filter(
        username=username, attempt_time__gte=get_cool_off_threshold(request)
    )
    return attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0


def _known_address(username: str, ip_address: str | None) -> bool:
    """Whether the account was signed in to from this address in the last KNOWN_ADDRESS_DAYS."""
    since = timezone.now() - timedelta(days=KNOWN_ADDRESS_DAYS)
    return AccessLog.objects.filter(
        username__iexact=username, ip_address=ip_address, attempt_time__gte=since
    ).exists()


class LoginLockoutHandler(AxesDatabaseHandler):
    """django-axes' database handler with the per-account count beside its own (see above).
    A request the account's lock holds is marked `belvedir_account_locked` for the page."""

    def get_failures(self, request, credentials: dict | None = None) -> int:
        failures = super().get_failures(request, credentials)
        username = get_client_username(request, credentials)
        if request is None or not username:
            return failures
        limit = get_failure_limit(request, credentials)
        if failures >= limit:
            return failures
        if _account_failures(username, request) < settings.BELVEDIR_ACCOUNT_LOCKOUT_LIMIT:
            return failures
        if _known_address(username, getattr(request, "axes_ip_address", None)):
            return failures
        request.belvedir_account_locked = True
        return limit
