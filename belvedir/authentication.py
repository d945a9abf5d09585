"""DRF authentication with project keys: `Authorization: Bearer bv_live_…`."""

from rest_framework import authentication, exceptions

from belvedir.models import ApiKey
from belvedir.services import api_key_authenticate


def bearer_token(request) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Project keys for the REST API. Per-run keys are for trace ingest only."""

    allow_run_keys = False

    def authenticate(self, request):
        token = bearer_token(request)
        if token is None:
            return None
        key = api_key_authenticate(token)
        if key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        if key.kind == ApiKey.Kind.RUN and not self.allow_run_keys:
            raise exceptions.PermissionDenied("A per-run key can only send traces and outcomes.")
        return (KeyUser(key), key)

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class RunKeyAuthentication(ApiKeyAuthentication):
    allow_run_keys = True


class KeyUser:
    """The principal behind an API key: authenticated, never staff."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    is_active = True

    def __init__(self, key: ApiKey):
        self.key = key
        self.pk = None
        self.id = None
        self.username = f"key:{key.prefix}"
        self.email = ""

    def __str__(self) -> str:
        return self.username
