"""HTTPS, HSTS and secure cookies for a hosted platform, and the Content-Security-Policy."""

from csp.constants import NONCE, NONE, SELF

from belvedir.env import envbool, envcsp, envint, envlist
from belvedir.settings.core import BELVEDIR_DEV

# Hosted defaults: with BELVEDIR_DEV=0, HTTPS only (`manage.py check --deploy` is clean).
# Sandboxes call the platform at BELVEDIR_SANDBOX_BASE_URL, which may be plain HTTP on a
# private network: their endpoints are exempt from the HTTPS redirect.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not BELVEDIR_DEV)
SECURE_REDIRECT_EXEMPT = envlist(
    "SECURE_REDIRECT_EXEMPT",
    [
        r"^api/v1/(traces|outcomes|chat/completions|completions|embeddings|responses|messages|models)$",
        r"^api/v1/runs/[^/]+/tasks$",
        r"^api/v1/adapters/",
        r"^git/",
    ],
)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not BELVEDIR_DEV)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not BELVEDIR_DEV)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if BELVEDIR_DEV else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not BELVEDIR_DEV)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not BELVEDIR_DEV)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto.
if envbool("BELVEDIR_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy (django-csp), on every response: scripts and styles come only from
# our own static files (no inline script without the request's nonce, no inline style, no
# eval), no plugins, no framing, forms post only here. An operator adds the hosts a CDN or an
# analytics service needs with BELVEDIR_CSP_EXTRA, as `script-src https://stats.example.com;
# connect-src https://stats.example.com` (a directive not listed here starts from 'self').
_CSP_BASE = {
    "default-src": [SELF],
    "script-src": [SELF, NONCE],
    "style-src": [SELF],
    "img-src": [SELF, "data:"],
    "connect-src": [SELF],
    "frame-ancestors": [NONE],
    "base-uri": [SELF],
    "form-action": [SELF],
    "object-src": [NONE],
}
for _directive, _sources in envcsp("BELVEDIR_CSP_EXTRA").items():
    _CSP_BASE[_directive] = [s for s in _CSP_BASE.get(_directive, [SELF]) if s != NONE] + _sources
CONTENT_SECURITY_POLICY = {"DIRECTIVES": _CSP_BASE}
