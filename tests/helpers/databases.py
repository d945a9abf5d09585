"""A PostgreSQL database of a test's own on the test server, named but not created (what
`make up` meets on a fresh machine), dropped afterwards whoever made it."""

import contextlib
import os
import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/belvedir"


def _server(url: str) -> dict:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or None,
        "dbname": "postgres",
        "autocommit": True,
    }


def database_exists(url: str) -> bool:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(**_server(url)) as conn:
        return bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone())


@contextlib.contextmanager
def unmade_database_url(prefix: str) -> Iterator[str]:
    """A DATABASE_URL on the tests' server whose database does not exist yet."""
    base = os.environ.get("DATABASE_URL", DEFAULT_URL)
    name = f"{prefix}_{secrets.token_hex(4)}"
    url = urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        with psycopg.connect(**_server(url)) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
