"""Signed links never reach a log: a run's ADAPTER_URL carries its grant in the path
(`/api/v1/adapters/{run}/{token}`), and the web server's access log (uvicorn.access), Django's
4xx/5xx warnings (django.request) and runserver's log (django.server) all print request paths.
The filter rewrites the token to [redacted] in each record's message and arguments, leaving
the run id to say which run asked."""

import logging
import re

SIGNED_PATH = re.compile(r"(/api/v1/adapters/[^/\s\"']+/)[^\s\"'?#]+")
REDACTED = r"\1[redacted]"
LOGGERS = ("uvicorn.access", "uvicorn.error", "django.request", "django.server")


def redact_signed_paths(text: str) -> str:
    return SIGNED_PATH.sub(REDACTED, text)


class RedactSignedPaths(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_signed_paths(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_signed_paths(a) if isinstance(a, str) else a for a in record.args
            )
        elif isinstance(record.args, dict):
            record.args = {
                k: redact_signed_paths(v) if isinstance(v, str) else v
                for k, v in record.args.items()
            }
        return True


def install() -> None:
    """Attach the filter to the loggers that print request paths (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSignedPaths) for f in logger.filters):
            logger.addFilter(RedactSignedPaths())
