"""Harness env values whose names mark them as secrets: encrypted at rest, shown masked.

A harness keeps its plain env in `Harness.env` and its secret values in
`Harness.env_secrets_encrypted` (one encrypted JSON object). Pages and the API show a secret
as MASK; submitting MASK back keeps the stored value, any other value replaces it.
"""

import json
import re

from belvedir import crypto
from belvedir.errors import Invalid

MASK = "••••"

_SECRET_EXACT = {"MODAL_TOKEN_SECRET", "BELVEDIR_AGENT_TOKEN", "OPENROUTER_API_KEY", "HF_TOKEN"}
_SECRET_NAME = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD")


def is_secret_name(name: str) -> bool:
    upper = str(name).upper()
    return upper in _SECRET_EXACT or bool(_SECRET_NAME.search(upper))


def secrets_decrypt(token: str) -> dict[str, str]:
    if not token:
        return {}
    return json.loads(crypto.decrypt(token))


def secrets_encrypt(values: dict[str, str]) -> str:
    return crypto.encrypt(json.dumps(values)) if values else ""


def env_split(env: dict[str, str], *, stored_token: str = "") -> tuple[dict[str, str], str]:
    """(plain env, encrypted secrets) for a submitted env; MASK keeps a stored secret."""
    stored = secrets_decrypt(stored_token)
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for key, value in env.items():
        if not is_secret_name(key):
            plain[key] = value
        elif value == MASK:
            if key not in stored:
                raise Invalid(
                    f"env key {key}: give the value; {MASK} keeps a value already saved, "
                    "and none is saved for this key.",
                    field="env",
                )
            secret[key] = stored[key]
        else:
            secret[key] = value
    return plain, secrets_encrypt(secret)


def env_masked(env: dict[str, str], token: str) -> dict[str, str]:
    """The env as pages and the API show it: secrets as MASK (blank ones stay blank)."""
    secret = secrets_decrypt(token)
    return {**env, **{key: MASK if value else "" for key, value in secret.items()}}


def env_plain(env: dict[str, str], token: str) -> dict[str, str]:
    """The whole env with its secrets, for the sandbox only."""
    return {**env, **secrets_decrypt(token)}


def secret_values(token: str) -> list[str]:
    return [value for value in secrets_decrypt(token).values() if value]
