"""The one error a sandbox backend raises. A leaf: every module of the package may import it."""


class SandboxError(Exception):
    """Anything a sandbox backend could not do; the message is fit to show a user."""
