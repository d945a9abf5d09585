class DomainError(Exception):
    """A rule was broken; the message is for the user, `field` names what to fix."""

    def __init__(self, message: str, *, field: str | None = None, code: str = "invalid"):
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code

    def as_dict(self) -> dict:
        key = self.field or "detail"
        return {key: [self.message]} if self.field else {"detail": self.message}
