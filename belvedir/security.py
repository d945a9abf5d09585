"""Rate limits: the login lockout's username (django-axes), API and sign-up throttles (DRF)."""

from django.conf import settings
from django.shortcuts import render
from rest_framework.throttling import SimpleRateThrottle


def login_username(request, credentials) -> str | None:
    """The login's email as accounts store it, so Owner@X and owner@x count as one account."""
    raw = (credentials or {}).get("username")
    if raw is None and request is not None:
        raw = request.POST.get("username")
    return (raw or "").strip().lower() or None


class _SettingRateThrottle(SimpleRateThrottle):
    """A throttle whose rate is the setting named `rate_setting`, read on every request."""

    rate_setting = ""

    def get_rate(self) -> str:
        return getattr(settings, self.rate_setting)

    def allow_request(self, request, view) -> bool:
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)


class ApiRateThrottle(_SettingRateThrottle):
    """BELVEDIR_API_RATE requests per API key, else per signed-in user, else per address."""

    scope = "api"
    rate_setting = "BELVEDIR_API_RATE"

    def get_cache_key(self, request, view) -> str:
        key = getattr(request.user, "key", None)
        if key is not None:
            ident = f"key:{key.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class SignupThrottle(_SettingRateThrottle):
    """BELVEDIR_SIGNUP_RATE sign-up attempts per address (the sign-up page)."""

    scope = "signup"
    rate_setting = "BELVEDIR_SIGNUP_RATE"

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def lockout_response(request, original_response, credentials):
    """django-axes' lockout answer: the site's page, 429, with Retry-After; saying which lock
    holds (this address's, or the account's against new addresses: belvedir.lockout)."""
    minutes = max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))
    context = {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "account_limit": settings.BELVEDIR_ACCOUNT_LOCKOUT_LIMIT,
        "account_locked": getattr(request, "belvedir_account_locked", False),
        "minutes": minutes,
    }
    response = render(request, "belvedir/locked_out.html", context, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response
