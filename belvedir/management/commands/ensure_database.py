"""Create DATABASE_URL's database on its server when there is none of that name (`make up`)."""

import psycopg
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from psycopg import sql


class Command(BaseCommand):
    help = "Create the configured PostgreSQL database if the server has none of that name."

    def handle(self, *args, **opts):
        s = connection.settings_dict
        name, where = s["NAME"], f"{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}"
        try:
            # The server's own maintenance database, as createdb connects to.
            with psycopg.connect(
                host=s["HOST"] or None,
                port=s["PORT"] or None,
                user=s["USER"] or None,
                password=s["PASSWORD"] or None,
                dbname="postgres",
                autocommit=True,
                connect_timeout=10,
            ) as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                    return
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:  # another start made it meanwhile
            return
        except psycopg.Error as exc:
            raise CommandError(
                f"could not make sure database {name!r} exists on PostgreSQL at {where}: {exc}"
                " (`make machine` installs and starts a server where none answers)"
            ) from None
        self.stderr.write(f"created database {name} on {where}")
