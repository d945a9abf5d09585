"""Signed adapter URLs: a run's sandbox downloads its fine-tuned model's adapter zip with no
login, for that run only, until the run's time cap ends.

The token is signed with `django.core.signing` (SECRET_KEY, its own salt) and binds the run
id, the model id and the expiry. It is deterministic for those three, so the platform can
redact it from whatever the run writes. Whether the run is still running is checked where
the download is served (runs), which owns the run.
"""

from dataclasses import dataclass

from django.core import signing

SALT = "belvedir.models_registry.adapter-url"
PATH = "/api/v1/adapters/{run_id}/{token}"


def _signer() -> signing.Signer:
    return signing.Signer(salt=SALT, sep=".")


@dataclass(frozen=True)
class AdapterGrant:
    run_id: str
    model_id: str
    expires: int  # Unix seconds


def adapter_token(grant: AdapterGrant) -> str:
    return _signer().sign_object({"r": grant.run_id, "m": grant.model_id, "e": grant.expires})


def adapter_url(base_url: str, grant: AdapterGrant) -> str:
    """The URL the sandbox gets as ADAPTER_URL, on its own (sandbox-facing) base URL."""
    path = PATH.format(run_id=grant.run_id, token=adapter_token(grant))
    return base_url.rstrip("/") + path


def adapter_grant(token: str) -> AdapterGrant | None:
    """What a token grants, if its signature holds; None for anything else."""
    try:
        payload = _signer().unsign_object(token)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if not isinstance(payload, dict):
        return None
    run_id, model_id, expires = payload.get("r"), payload.get("m"), payload.get("e")
    if not (isinstance(run_id, str) and isinstance(model_id, str) and isinstance(expires, int)):
        return None
    return AdapterGrant(run_id=run_id, model_id=model_id, expires=expires)
