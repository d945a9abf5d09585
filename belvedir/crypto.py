"""Encrypt secrets users hand us (model keys) at rest, keyed by FIELD_ENCRYPTION_KEY."""

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=4)
def _fernet(material: str) -> Fernet:
    key = base64.urlsafe_b64encode(hashlib.sha256(material.encode()).digest())
    return Fernet(key)


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(token.encode()).decode()
    except InvalidToken:
        raise ValueError("cannot decrypt: FIELD_ENCRYPTION_KEY changed?") from None
