"""The domain errors services raise: each class says what went wrong, the message says it to a user.

`belvedir.error_responses` turns them into HTTP answers, in one table, for the API and the pages.
`NotFound` and `Forbidden` are also Django's `Http404` and `PermissionDenied`, so code that
expects those (Django's own handlers, a `try/except Http404`) keeps working.
"""

from django.core.exceptions import PermissionDenied
from django.http import Http404


class DomainError(Exception):
    """A rule was broken; the message is for the user, `field` names what to fix.

    `code` is a short machine-readable reason (`cap_daily`, `repo`); it defaults to the class's.
    """

    default_code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code or self.default_code
        self.retry_after = retry_after

    def as_dict(self) -> dict:
        """The body: `{field: [message]}` for a field (the shape DRF's validation uses),
        else `{"detail": message, "code": code}`."""
        if self.field:
            return {self.field: [self.message]}
        return {"detail": self.message, "code": self.code}


class Invalid(DomainError):
    """The input breaks a rule; `field` names the input to fix."""

    default_code = "invalid"


class NotFound(DomainError, Http404):
    """No such object, or not one the caller may see."""

    default_code = "not_found"


class Forbidden(DomainError, PermissionDenied):
    """The caller may see this but not do this (a read-only member's write)."""

    default_code = "forbidden"


class Conflict(DomainError):
    """The request reached the wrong place for the object's current state (a run's task
    sandboxes asked of a platform process on another worker host than the run's)."""

    default_code = "conflict"


class TooLarge(DomainError):
    """The request is larger than the platform takes (its body past the upload limit)."""

    default_code = "too_large"


class LimitReached(DomainError):
    """A counted limit (runs in flight, runs a day) is reached; `retry_after` in seconds if known."""

    default_code = "limit_reached"


class PaymentRequired(DomainError):
    """The organization's balance or spend cap does not cover this."""

    default_code = "payment_required"


class Unavailable(DomainError):
    """A dependency is down or overloaded; `retry_after` in seconds if known."""

    default_code = "unavailable"
