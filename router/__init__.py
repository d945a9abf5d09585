"""The OpenAI-compatible model router, the top floor: it may import every app; nothing imports it."""
