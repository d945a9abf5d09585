"""The router's OpenAPI description takes its body limit from the router's own constant."""

from router import schema
from router.http import MAX_BODY_BYTES


def _too_large() -> str:
    return schema._chat_operation()["responses"]["413"]["description"]


def test_the_413_names_the_routers_body_limit(monkeypatch):
    assert MAX_BODY_BYTES == 8 * 2**20 and "over 8 MB (body_too_large)" in _too_large()
    monkeypatch.setattr(schema, "MAX_BODY_BYTES", 2 * 2**20)
    assert "over 2 MB (body_too_large)" in _too_large()
