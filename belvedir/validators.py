"""Checks shared across apps, defined once. Plain Python: the CLI may import this too."""

import re

# NUL and lone UTF-16 surrogates: PostgreSQL refuses them in text and jsonb.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_unstorable(text: str) -> bool:
    """Whether `text` holds a NUL or a lone surrogate."""
    return UNSTORABLE.search(text) is not None


def storable(text: str) -> str:
    """`text` with each NUL and lone surrogate replaced by U+FFFD."""
    return UNSTORABLE.sub(REPLACEMENT, text)
