"""Encrypt secrets users hand us (model keys, secret harness env) at rest.

FIELD_ENCRYPTION_KEY may list several keys, comma-separated: new writes use the first, every
listed key decrypts, so a key is rotated by putting the new one first, running
`manage.py reencrypt_fields`, then dropping the old one.
"""

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

# Columns that hold crypto.encrypt() tokens are named `<something>_encrypted`; the
# re-encryption command finds them by that name in every app.
ENCRYPTED_SUFFIX = "_encrypted"


@lru_cache(maxsize=4)
def _fernet(materials: tuple[str, ...]) -> MultiFernet:
    keys = [base64.urlsafe_b64encode(hashlib.sha256(m.encode()).digest()) for m in materials]
    return MultiFernet([Fernet(key) for key in keys])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.FIELD_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return _current().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ValueError("cannot decrypt: FIELD_ENCRYPTION_KEY changed?") from None


def reencrypt(token: str) -> str:
    """The token under the current (first) key; the same token when it already is."""
    if not token:
        return ""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise ValueError("cannot decrypt: FIELD_ENCRYPTION_KEY changed?") from None
