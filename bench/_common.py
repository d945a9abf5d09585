"""Helpers shared by the benchmarks: a throwaway PostgreSQL database, Django setup, tables.

Each benchmark owns one database (dropped and created at start, dropped at the end), so it
never touches the development or test data. PostgreSQL is expected at 127.0.0.1:5432 with
trust auth for `postgres` (override with BENCH_PG_URL=postgres://user@host:port).
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432").rstrip("/")


def _admin_connection():
    import psycopg

    return psycopg.connect(f"{PG_URL}/postgres", autocommit=True, connect_timeout=5)


def database_recreate(name: str) -> str:
    """Drop (if there) and create database `name`; its URL."""
    from psycopg import sql

    with _admin_connection() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{PG_URL}/{name}"


def database_exists(name: str) -> bool:
    with _admin_connection() as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            is not None
        )


def database_drop(name: str) -> None:
    from psycopg import sql

    try:
        from django.db import connections

        connections.close_all()
    except Exception:
        pass
    with _admin_connection() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def django_setup(database_url: str, **env: str) -> None:
    """Point settings at `database_url` (and the given env), set Django up, migrate."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "belvedir.settings"
    os.environ["DEBUG"] = "0"  # no query log in connection.queries
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.update(env)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
