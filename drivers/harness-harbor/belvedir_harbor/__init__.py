"""Belvedir's Harbor driver: the Belvedir Harbor agent (`belvedir_harbor.agent:BelvedirAgent`,
plain name `belvedir`) and `python3 -m belvedir_harbor.run`, which runs `harbor run`."""

__version__ = "1.0.0"
AGENT_IMPORT_PATH = "belvedir_harbor.agent:BelvedirAgent"
