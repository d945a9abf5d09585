"""PostgreSQL (DATABASES, its pool for the ASGI web process) and the cache."""

import sys

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envbool, envfloat, envint, envstr

# PostgreSQL is the only database: the product's guarantees are its own (row locks for the caps
# and coupons, advisory locks, prepared statements, jsonb). `make machine` installs and starts
# one where none answers at the default URL (scripts/ensure-postgres.sh).
DATABASE_URL = envstr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/belvedir")
# Persistent connections outlive a request by CONN_MAX_AGE seconds, checked before reuse; the
# development server opens a thread per request, so it keeps none (they would pile up).
_RUNSERVER = sys.argv[1:2] == ["runserver"]
# The ASGI web process (these settings loaded by importing belvedir.asgi, unless
# BELVEDIR_DB_POOL says otherwise) runs each request's sync code in a thread of its own, whose
# connection dies with it: there the connections come from a pool (psycopg_pool, Django's
# OPTIONS["pool"]) that outlives the threads, of at most BELVEDIR_DB_POOL_MAX_SIZE; a request
# that finds none free waits BELVEDIR_DB_POOL_TIMEOUT seconds for one, then fails. A pooled
# connection goes back when its request ends (CONN_MAX_AGE 0) and is checked before a request
# gets it (Django hands psycopg_pool its check_connection when CONN_HEALTH_CHECKS is on, as
# below), so a backend the server closed (a restart, pg_terminate_backend) is replaced, not
# a 500. Workers, clusters, commands and the tests keep their own connections.
_ASGI = "belvedir.asgi" in sys.modules  # being imported: settings load from its first lines
BELVEDIR_DB_POOL = envbool("BELVEDIR_DB_POOL", _ASGI) and not _RUNSERVER
CONN_MAX_AGE = 0 if _RUNSERVER or BELVEDIR_DB_POOL else envint("CONN_MAX_AGE", 60, minimum=0)
try:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL, conn_max_age=CONN_MAX_AGE, conn_health_checks=True
        )
    }
except Exception as exc:  # dj_database_url raises several types
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        "DATABASE_URL must be a PostgreSQL URL (postgres://user@host:5432/name): Belvedir runs "
        f"on PostgreSQL only, not {DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}"
    )
# psycopg's prepared statements, which Django turns off by default (None). Django's own
# cursors bind on the client and never prepare; the statements ingest runs on
# server-side binding cursors (traces.services.ingest) are prepared once per connection,
# so PostgreSQL stops parsing and planning them for every batch. The router's own
# connections (billing.spend, made from these settings) prepare its reservation once it
# has run five times.
DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 5
if BELVEDIR_DB_POOL:
    # It grows only as requests need connections at once; a streamed answer (a task
    # sandbox's exec output) holds its request's until it ends, as each held a backend of
    # its own before: the cap is there for PostgreSQL's max_connections, not to queue them.
    _pool_max = envint("BELVEDIR_DB_POOL_MAX_SIZE", 100, minimum=1)
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": min(envint("BELVEDIR_DB_POOL_MIN_SIZE", 1, minimum=1), _pool_max),
        "max_size": _pool_max,
        "timeout": envfloat("BELVEDIR_DB_POOL_TIMEOUT", 10.0),
        "name": "belvedir-web",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis, when there is one: the throttle and rate-limit counters and django-q2's broker.
REDIS_URL = envstr("REDIS_URL", "")
# Throttle and rate-limit counters: shared through Redis when there is one.
if envstr("REDIS_URL", ""):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": envstr("REDIS_URL", ""),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
