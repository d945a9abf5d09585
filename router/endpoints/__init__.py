"""The APIs the router serves, by their path under /api/v1 (`ENDPOINTS`)."""

from router.endpoints.anthropic import Messages
from router.endpoints.base import Endpoint, Reading
from router.endpoints.openai import Chat, Completions, Embeddings, Responses

CHAT = Chat()
ENDPOINTS: dict[str, Endpoint] = {
    endpoint.path: endpoint
    for endpoint in (CHAT, Completions(), Embeddings(), Responses(), Messages())
}

__all__ = ["CHAT", "ENDPOINTS", "Endpoint", "Reading"]
