"""The errors a sandbox backend raises. A leaf: every module of the package may import it."""


class SandboxError(Exception):
    """Anything a sandbox backend could not do; the message is fit to show a user."""


class NoRoom(SandboxError):
    """The disk cannot keep its reserve with one more volume (diskquota.check_room).
    `later`: whether it could once the other sandboxes' volumes were given back (False: the
    volume is larger than the disk could ever keep with its reserve)."""

    def __init__(self, message: str, *, later: bool = True):
        super().__init__(message)
        self.later = later
