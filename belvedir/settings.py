"""Belvedir Benchmarks settings: one module, driven by environment variables."""

import re
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from belvedir.env import (
    envbool,
    envcsp,
    envfloat,
    envgpus,
    envint,
    envlist,
    envmicros,
    envrate,
    envsize,
    envstr,
)
from belvedir.secret_files import secret_file_once

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = envbool("DEBUG", False)
# Development mode (the default, for `make up` and tests) may use built-in secrets; with
# BELVEDIR_DEV=0 every secret must be given, or the start-up stops here.
BELVEDIR_DEV = envbool("BELVEDIR_DEV", True)


def _secret(name: str) -> str:
    value = envstr(name, "")
    if value:
        if not BELVEDIR_DEV and len(value) < 32:
            raise ImproperlyConfigured(f"{name} must be at least 32 characters")
        return value
    if not BELVEDIR_DEV:
        raise ImproperlyConfigured(f"{name} must be set when BELVEDIR_DEV is off")
    return f"dev-insecure-{name.lower()}"


# In development an unset SECRET_KEY is a random one made once and kept in this file (mode
# 0600, never printed), so sessions and signed URLs outlive a `make up` restart.
BELVEDIR_SECRET_KEY_FILE = Path(
    envstr("BELVEDIR_SECRET_KEY_FILE", str(BASE_DIR / "var" / "secret_key"))
)


def _secret_key() -> str:
    if envstr("SECRET_KEY", "") or not BELVEDIR_DEV:
        return _secret("SECRET_KEY")
    try:
        return secret_file_once(BELVEDIR_SECRET_KEY_FILE)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"SECRET_KEY is unset and {BELVEDIR_SECRET_KEY_FILE} cannot be read or made "
            f"({exc.strerror}): set SECRET_KEY or BELVEDIR_SECRET_KEY_FILE"
        ) from None


SECRET_KEY = _secret_key()
# Keyed hash for API keys: its own secret, never SECRET_KEY.
API_KEY_HASH_SECRET = _secret("API_KEY_HASH_SECRET")
# Key material for the secrets users hand us (model keys, secret harness env), stored
# encrypted. Comma-separated for rotation: the first key encrypts, every key decrypts.
FIELD_ENCRYPTION_KEYS = [k.strip() for k in _secret("FIELD_ENCRYPTION_KEY").split(",") if k.strip()]
if not FIELD_ENCRYPTION_KEYS:
    raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY must name at least one key")
if not BELVEDIR_DEV and any(len(k) < 32 for k in FIELD_ENCRYPTION_KEYS):
    raise ImproperlyConfigured("each FIELD_ENCRYPTION_KEY key must be at least 32 characters")
FIELD_ENCRYPTION_KEY = FIELD_ENCRYPTION_KEYS[0]
if not BELVEDIR_DEV and len({SECRET_KEY, API_KEY_HASH_SECRET, *FIELD_ENCRYPTION_KEYS}) < 2 + len(
    FIELD_ENCRYPTION_KEYS
):
    raise ImproperlyConfigured(
        "SECRET_KEY, API_KEY_HASH_SECRET and FIELD_ENCRYPTION_KEY must differ"
    )

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "belvedir",
    "harnesses",
    "runs",  # before django_q: its `qcluster` command is the one manage.py runs
    "django_q",
    "traces",
    "billing",
    "models_registry",
    "router",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "belvedir.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Django's DEBUG 404 page lists every URL pattern: pages get the site's 404 page instead.
    "belvedir.middleware.StyledNotFoundMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "belvedir.middleware.AuditContextMiddleware",
    # Before DomainErrorMiddleware: it answers domain errors, this one what is left under /api/.
    "belvedir.middleware.ApiServerErrorMiddleware",
    "belvedir.error_responses.DomainErrorMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "belvedir.urls"
WSGI_APPLICATION = "belvedir.wsgi.application"
ASGI_APPLICATION = "belvedir.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "belvedir.context_processors.tenancy",
            ],
            # {% partialdef %} in every template without {% load partials %}.
            "builtins": [
                "template_partials.templatetags.partials",
                "belvedir.templatetags.belvedir_tags",
            ],
        },
    }
]

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
# connections (router.reserve, made from these settings) prepare its reservation once it
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
# django-axes sees every login first and locks out after repeated failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15, minimum=1))
# An address guessing one account's password is locked out of that account; the account
# itself stays open to its owner elsewhere (a lockout is not a way to deny someone service).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Guessing from many addresses: past this many failures of one account within the cool-off,
# from any addresses, the account is locked against every address it was not signed in to
# from (belvedir/lockout.py): its owner's own addresses stay open.
AXES_HANDLER = "belvedir.lockout.LoginLockoutHandler"
BELVEDIR_ACCOUNT_LOCKOUT_LIMIT = envint("BELVEDIR_ACCOUNT_LOCKOUT_LIMIT", 20, minimum=1)
AXES_USERNAME_CALLABLE = "belvedir.security.login_username"
AXES_LOCKOUT_CALLABLE = "belvedir.security.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Sign-ups per address (DRF rate syntax: N/second|minute|hour|day).
BELVEDIR_SIGNUP_RATE = envrate("BELVEDIR_SIGNUP_RATE", "10/hour")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Email (invitations): the console backend in development prints messages to the server log;
# set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and EMAIL_HOST… to send them.
EMAIL_BACKEND = envstr(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if BELVEDIR_DEV
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "Belvedir <no-reply@belvedir.local>")
# How long an invitation link stays valid.
BELVEDIR_INVITATION_DAYS = envint("BELVEDIR_INVITATION_DAYS", 7, minimum=1)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "belvedir" / "static"]
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Uploaded files (fine-tuned models' adapter zips) go through the default storage: the file
# system under MEDIA_ROOT unless STORAGES["default"] names another backend (S3-compatible...).
MEDIA_ROOT = envstr("BELVEDIR_MEDIA_ROOT", str(BASE_DIR / "var" / "media"))
# The largest LoRA adapter zip accepted, as uploaded and in total unpacked.
BELVEDIR_ADAPTER_MAX_BYTES = envsize("BELVEDIR_ADAPTER_MAX_BYTES", 2 * 2**30, minimum=1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "belvedir.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "belvedir.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "belvedir.schema.AutoSchema",
    "EXCEPTION_HANDLER": "belvedir.api.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "belvedir.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": ["belvedir.security.ApiRateThrottle"],
    # Proxies in front that append to X-Forwarded-For; 0 trusts only the connecting address.
    "NUM_PROXIES": envint("BELVEDIR_NUM_PROXIES", 0, minimum=0),
}
# Requests per API key (or signed-in user) to the REST API: N/second|minute|hour|day.
BELVEDIR_API_RATE = envrate("BELVEDIR_API_RATE", "600/minute")

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
SPECTACULAR_SETTINGS = {
    "TITLE": "Belvedir Benchmarks API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No validator badge: it would send the schema's address to validator.swagger.io (and the
    # Content-Security-Policy allows no image from there).
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "REDOC_DIST": "SIDECAR",
    "DESCRIPTION": (
        "Register benchmark harnesses, launch runs in sandboxes, read scores, send and read "
        "traces. Authenticate with a project API key: `Authorization: Bearer bv_live_…`."
    ),
    # Request bodies get their own components (`RunLaunchRequest`), as generated clients expect.
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "traces.schema.ingest_endpoints",
        "router.schema.router_endpoints",
    ],
    # The schema's completeness is not a deployment setting: keep `check --deploy` about
    # deployment (`manage.py spectacular --validate` reports the schema's own warnings).
    "ENABLE_DJANGO_DEPLOY_CHECK": False,
    # Two models call their choices `status`: each its own component.
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "runs.models.Status",
        "TaskSandboxStatusEnum": "runs.models.TaskSandboxStatus",
    },
}

# django-q2: the ORM broker by default, Redis when REDIS_URL is set. Two clusters, one queue
# each, started with Q_CLUSTER_NAME: "runs" executes runs (Q_WORKERS at a time; more wait
# queued), "housekeeping" runs the schedules (the reaper, the task former), so those never wait
# behind runs.
REDIS_URL = envstr("REDIS_URL", "")
Q_RUNS_CLUSTER = "runs"
Q_HOUSEKEEPING_CLUSTER = "housekeeping"
Q_CLUSTER = {
    "name": "belvedir",
    "ALT_CLUSTERS": {
        Q_RUNS_CLUSTER: {},
        Q_HOUSEKEEPING_CLUSTER: {
            "workers": envint("Q_HOUSEKEEPING_WORKERS", 2, minimum=1),
            "timeout": 600,
            "retry": 660,
        },
        # One queue per GPU type (gpu-a10g, …), one worker per device of the type.
        **{
            f"gpu-{kind.lower()}": {"workers": count}
            for kind, count in envgpus("BELVEDIR_GPU_TYPES").items()
        },
    },
    "workers": envint("Q_WORKERS", 8, minimum=1),
    # Tasks a cluster takes off the shared queue beyond its busy workers (one more is in its
    # pusher's hand). django-q2's default, workers², lets a busy host hold 64 runs another
    # host could start; 1 keeps the rest in the queue for whichever host frees up first.
    "queue_limit": envint("Q_QUEUE_LIMIT", 1, minimum=1),
    "timeout": envint("Q_TIMEOUT", 5400, minimum=10),
    "retry": envint("Q_RETRY", 5700, minimum=20),
    "max_attempts": 1,
    "poll": 0.2,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 500,
    "label": "Django Q2",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
if Q_CLUSTER["timeout"] >= Q_CLUSTER["retry"]:
    raise ImproperlyConfigured("Q_TIMEOUT must be below Q_RETRY")
# `manage.py qcluster` (runs/management/commands/qcluster.py): after a SIGTERM, runs in flight
# may finish for this many seconds before the cluster stops them (0: as long as they take; a
# second SIGTERM stops them at once). A stopped run is failed or requeued by the reaper.
Q_STOP_GRACE = envint("Q_STOP_GRACE", 0, minimum=0)

# The Harbor export (`belvedir environments export`, README "Run an environment with Harbor"):
# the image every exported task's Dockerfile builds FROM (it needs python3). An offline install
# points it at a local image, e.g. belvedir-sandbox:latest.
BELVEDIR_EXPORT_BASE_IMAGE = envstr("BELVEDIR_EXPORT_BASE_IMAGE", "python:3.13-slim")
# The image a Harbor harness's run sandbox runs in (the sandbox image plus the pinned Harbor and
# docker compose v2), built by `make harbor-image` (scripts/harbor-image.sh).
BELVEDIR_HARBOR_IMAGE = envstr("BELVEDIR_HARBOR_IMAGE", "belvedir-harbor:0.26.0")

# Runs and sandboxes
BELVEDIR_BASE_URL = envstr("BELVEDIR_BASE_URL", "http://127.0.0.1:8000")
# Sandbox isolation (README, "How sandboxes are isolated"): sandboxes join the bridge network
# that scripts/sandbox-network.sh installs and reach the platform only through the sandbox
# gateway (`manage.py sandbox_gateway`) on the gateway IP. Host networking is for
# single-tenant development only and needs BELVEDIR_SANDBOX_HOST_NETWORK=1.
BELVEDIR_SANDBOX_HOST_NETWORK = envbool("BELVEDIR_SANDBOX_HOST_NETWORK", False)
BELVEDIR_SANDBOX_NETWORK = envstr("BELVEDIR_SANDBOX_NETWORK", "belvedir-sandbox")
if BELVEDIR_SANDBOX_NETWORK in {"host", "bridge", "none", "default"}:
    raise ImproperlyConfigured(
        "BELVEDIR_SANDBOX_NETWORK must name the isolated sandbox network (belvedir-sandbox), not "
        f"{BELVEDIR_SANDBOX_NETWORK!r}; host networking needs BELVEDIR_SANDBOX_HOST_NETWORK=1"
    )
BELVEDIR_SANDBOX_SUBNET = envstr("BELVEDIR_SANDBOX_SUBNET", "172.30.0.0/24")
BELVEDIR_SANDBOX_GATEWAY = envstr("BELVEDIR_SANDBOX_GATEWAY", "172.30.0.1")
BELVEDIR_SANDBOX_BRIDGE = envstr("BELVEDIR_SANDBOX_BRIDGE", "br-belvedir")
BELVEDIR_SANDBOX_PORTS = envstr("BELVEDIR_SANDBOX_PORTS", "18700:18799")
if not re.match(r"^\d{1,5}(:\d{1,5})?$", BELVEDIR_SANDBOX_PORTS):
    raise ImproperlyConfigured("BELVEDIR_SANDBOX_PORTS must be a port or a range like 18700:18799")
# Private networks sandboxes may reach anyway (an internal package mirror), comma-separated
# CIDRs; everything else in 10/8, 172.16/12, 192.168/16, 100.64/10 is dropped by the firewall.
BELVEDIR_SANDBOX_ALLOW_CIDRS = envlist("BELVEDIR_SANDBOX_ALLOW_CIDRS", [])
BELVEDIR_SANDBOX_GATEWAY_UPSTREAM = envstr(
    "BELVEDIR_SANDBOX_GATEWAY_UPSTREAM", "http://127.0.0.1:8000"
)
# Where the gateway sends the task-sandbox paths (blank: the upstream above). On a worker host
# behind a load balancer: a platform process on this host, on this host's engine (docs/scaling.md).
BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM = envstr("BELVEDIR_SANDBOX_GATEWAY_TASK_UPSTREAM", "")
# What one tenant may hold of the gateway (sandboxes/gateway.py `Limits`): connections in all,
# per organization, per run and per sandbox (source address); past one, 503 with Retry-After.
# The defaults fit 4 runs x 4 task sandboxes of one organization and leave 3/4 to the others.
BELVEDIR_SANDBOX_GATEWAY_MAX_CONNECTIONS = envint(
    "BELVEDIR_SANDBOX_GATEWAY_MAX_CONNECTIONS", 512, minimum=2
)
BELVEDIR_SANDBOX_GATEWAY_PER_ORGANIZATION = envint(
    "BELVEDIR_SANDBOX_GATEWAY_PER_ORGANIZATION", 128, minimum=1
)
if BELVEDIR_SANDBOX_GATEWAY_PER_ORGANIZATION * 2 > BELVEDIR_SANDBOX_GATEWAY_MAX_CONNECTIONS:
    raise ImproperlyConfigured(
        "BELVEDIR_SANDBOX_GATEWAY_PER_ORGANIZATION must be at most half of "
        "BELVEDIR_SANDBOX_GATEWAY_MAX_CONNECTIONS, so one organization cannot fill the gateway"
    )
BELVEDIR_SANDBOX_GATEWAY_PER_RUN = envint("BELVEDIR_SANDBOX_GATEWAY_PER_RUN", 64, minimum=1)
BELVEDIR_SANDBOX_GATEWAY_PER_SANDBOX = envint("BELVEDIR_SANDBOX_GATEWAY_PER_SANDBOX", 32, minimum=1)
# Seconds a request head may take in all; a body's grace and then its minimum bytes a second
# (as Apache's mod_reqtimeout), else 408; seconds a sandbox may leave its reply unread.
BELVEDIR_SANDBOX_GATEWAY_HEAD_TIMEOUT = envfloat("BELVEDIR_SANDBOX_GATEWAY_HEAD_TIMEOUT", 10.0)
BELVEDIR_SANDBOX_GATEWAY_BODY_GRACE = envfloat("BELVEDIR_SANDBOX_GATEWAY_BODY_GRACE", 10.0)
BELVEDIR_SANDBOX_GATEWAY_BODY_MIN_RATE = envint(
    "BELVEDIR_SANDBOX_GATEWAY_BODY_MIN_RATE", 500, minimum=1
)
BELVEDIR_SANDBOX_GATEWAY_SEND_TIMEOUT = envfloat("BELVEDIR_SANDBOX_GATEWAY_SEND_TIMEOUT", 60.0)
BELVEDIR_SANDBOX_BASE_URL = envstr(
    "BELVEDIR_SANDBOX_BASE_URL",
    BELVEDIR_BASE_URL
    if BELVEDIR_SANDBOX_HOST_NETWORK
    else f"http://{BELVEDIR_SANDBOX_GATEWAY}:{BELVEDIR_SANDBOX_PORTS.split(':')[0]}",
)
# gVisor by default; runc works too, with a warning on the admin and in the log.
BELVEDIR_SANDBOX_RUNTIME = envstr("BELVEDIR_SANDBOX_RUNTIME", "runsc")
# Per-sandbox disk quota (loop-mounted ext4 images under the data dir; needs root), and the
# free space a worker keeps: new runs are refused below it.
BELVEDIR_SANDBOX_DISK = envsize("BELVEDIR_SANDBOX_DISK", 10 * 2**30, minimum=16 * 2**20)
BELVEDIR_SANDBOX_DATA_DIR = envstr("BELVEDIR_SANDBOX_DATA_DIR", "/var/lib/belvedir/sandboxes")
BELVEDIR_MIN_FREE_DISK = envsize("BELVEDIR_MIN_FREE_DISK", 2 * 2**30, minimum=0)
# Quota volumes a worker host keeps made ahead for the next sandboxes (0: none); an unused
# one is released by the reaper after 10 minutes. Each counts against BELVEDIR_MIN_FREE_DISK.
BELVEDIR_SANDBOX_SPARE_VOLUMES = envint("BELVEDIR_SANDBOX_SPARE_VOLUMES", 1, minimum=0)
# Sandboxes of the default shape a worker host keeps started ahead (0: none), so a run skips
# the sandbox's start (~450 ms under gVisor); each holds its memory and a quota volume while it
# waits (given back to a run that finds no room on the disk), and is replaced after
# BELVEDIR_SANDBOX_WARM_MAX_AGE seconds unused (sandboxes/warm.py). Two: a launch right
# after a run's end takes the second while the first one's successor is being made.
BELVEDIR_SANDBOX_WARM = envint("BELVEDIR_SANDBOX_WARM", 2, minimum=0)
BELVEDIR_SANDBOX_WARM_MAX_AGE = envint("BELVEDIR_SANDBOX_WARM_MAX_AGE", 3600, minimum=60)
BELVEDIR_SANDBOX_IMAGE = envstr("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
BELVEDIR_SANDBOX_CPUS = envfloat("BELVEDIR_SANDBOX_CPUS", 2.0)
BELVEDIR_SANDBOX_MEMORY = envstr("BELVEDIR_SANDBOX_MEMORY", "4g")
BELVEDIR_SANDBOX_PIDS = envint("BELVEDIR_SANDBOX_PIDS", 512, minimum=16)
BELVEDIR_SANDBOX_CA_BUNDLE = envstr(
    "BELVEDIR_SANDBOX_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"
)
BELVEDIR_INSTANCE = envstr("BELVEDIR_INSTANCE", "")
# Seconds another platform instance may go without a heartbeat on a worker host (every reaper
# pass, warm fill and launch of it there; sandboxes/instances.py) before that host's reaper
# removes its sandboxes and releases their volumes: well above BELVEDIR_REAP_SECONDS.
BELVEDIR_INSTANCE_STALE = envint("BELVEDIR_INSTANCE_STALE", 600, minimum=60)
BELVEDIR_CACHE_DIR = envstr("BELVEDIR_CACHE_DIR", "/var/cache/belvedir")
BELVEDIR_RUN_TIMEOUT = envint("BELVEDIR_RUN_TIMEOUT", 3600, minimum=1)
BELVEDIR_RUNS_IN_FLIGHT_CAP = envint("BELVEDIR_RUNS_IN_FLIGHT_CAP", 4, minimum=1)
BELVEDIR_RUNS_PER_DAY_CAP = envint("BELVEDIR_RUNS_PER_DAY_CAP", 24, minimum=1)
# file:// repos read the worker's disk: allowed under BELVEDIR_DEV=1, else only under this
# operator-set directory (empty: none at all).
BELVEDIR_FILE_REPO_ROOT = envstr("BELVEDIR_FILE_REPO_ROOT", "")
# Repo hosts that resolve to loopback, private, link-local, CGNAT, unspecified or multicast
# addresses are refused (the worker would reach internal services) unless BELVEDIR_DEV=1 or
# the host (a name, an address or a CIDR) is listed here, comma-separated.
BELVEDIR_REPO_HOST_ALLOWLIST = envlist("BELVEDIR_REPO_HOST_ALLOWLIST", [])
BELVEDIR_GIT_TIMEOUT = envint("BELVEDIR_GIT_TIMEOUT", 15, minimum=1)
BELVEDIR_HEARTBEAT_STALE = envint("BELVEDIR_HEARTBEAT_STALE", 90, minimum=5)
# How often each runs or GPU cluster reaps on its own host (its engine's orphan sandboxes and
# volumes, and any host's runs whose heartbeats stopped), besides the housekeeping schedule.
BELVEDIR_REAP_SECONDS = envint("BELVEDIR_REAP_SECONDS", 60, minimum=1)
# GPU runs (README, "GPU runs"): the GPU types this platform's workers serve and how many
# devices of each a worker host has (`a10g:1,a100:2`); a GPU harness of another type is
# refused at launch. A GPU worker host runs one cluster per type (Q_CLUSTER_NAME=gpu-a10g), as
# many workers as devices, and gives each run one device (Docker device ids 0, 1, … in the
# order listed). BELVEDIR_GPU_SIMULATE=1 (development, tests): devices are claimed the same
# way but no device is requested from Docker (sandboxes run without a GPU).
BELVEDIR_GPU_TYPES = envgpus("BELVEDIR_GPU_TYPES")
BELVEDIR_GPU_SIMULATE = envbool("BELVEDIR_GPU_SIMULATE", False)
# This worker host's name for its GPU devices (two hosts may not share one); the host name
# by default.
BELVEDIR_WORKER_HOST = envstr("BELVEDIR_WORKER_HOST", "")
# Covered model usage: a run that leaves its model key blank and names a covered model calls
# the router, which pays the operator's upstream with this key, up to the cap per run.
BELVEDIR_ROUTER_UPSTREAM_KEY = envstr("BELVEDIR_ROUTER_UPSTREAM_KEY", "")
BELVEDIR_COVERED_SPEND_CAP_MICROS = envmicros("BELVEDIR_COVERED_SPEND_CAP_USD", "2.00")
# Run pricing: benchmark runs are free unless an operator sets a price (the earlier docs'
# $0.50 a CPU run, $5.00 a GPU run), charged at launch, refunded if the sandbox never launched.
BELVEDIR_RUN_PRICE_CPU_USD = envfloat("BELVEDIR_RUN_PRICE_CPU_USD", 0.0)
BELVEDIR_RUN_PRICE_GPU_USD = envfloat("BELVEDIR_RUN_PRICE_GPU_USD", 0.0)
if not (0 <= BELVEDIR_RUN_PRICE_CPU_USD <= 10_000 and 0 <= BELVEDIR_RUN_PRICE_GPU_USD <= 10_000):
    raise ImproperlyConfigured("BELVEDIR_RUN_PRICE_CPU_USD and _GPU_USD must be 0 to 10000 (USD)")
# The managed Harbor workspace: what a minute of one task sandbox costs (0: free); image
# builds' time cap and the upload/download/context size caps of the task-sandbox API.
BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = envfloat(
    "BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD", 0.0
)
if not 0 <= BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD <= 100:
    raise ImproperlyConfigured("BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD must be 0 to 100 (USD)")
BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT = envint("BELVEDIR_TASK_IMAGE_BUILD_TIMEOUT", 1800)
BELVEDIR_TASK_SANDBOX_CONTEXT_MAX_BYTES = 256 * 2**20  # a build context (POST)
BELVEDIR_TASK_SANDBOX_CONTEXT_UNPACKED_MAX_BYTES = 2**30  # the same, unpacked
BELVEDIR_TASK_SANDBOX_UPLOAD_MAX_BYTES = 2**30  # files into a task sandbox (PUT)
# Task image builds (docs/task-sandboxes.md, "What a build may touch"): their RUN steps run in
# containers made like task sandboxes (gVisor, the sandbox network), the rest of the
# Dockerfile by the engine's builder. FROM and COPY --from name only the build's own stages
# and these images (exact names); a base the engine lacks is pulled only with _PULL=1; task
# images no task sandbox used for _TTL seconds are removed by the reaper.
if not envbool("BELVEDIR_TASK_BUILD_IN_SANDBOX", True):
    raise ImproperlyConfigured(
        "BELVEDIR_TASK_BUILD_IN_SANDBOX=0 is no longer supported: task images' RUN steps always "
        "run under the sandbox runtime (docs/task-sandboxes.md)"
    )
BELVEDIR_TASK_BASE_IMAGES = envlist(
    "BELVEDIR_TASK_BASE_IMAGES", [BELVEDIR_SANDBOX_IMAGE, BELVEDIR_EXPORT_BASE_IMAGE]
)
BELVEDIR_TASK_BASE_PULL = envbool("BELVEDIR_TASK_BASE_PULL", False)
BELVEDIR_TASK_IMAGE_TTL = envint("BELVEDIR_TASK_IMAGE_TTL", 24 * 3600, minimum=60)
# What one task sandbox may write to its filesystem (its writable layer, watched by the run's
# worker); 0: the run sandboxes' disk quota.
BELVEDIR_TASK_SANDBOX_DISK = envsize("BELVEDIR_TASK_SANDBOX_DISK", 0)
if 0 < BELVEDIR_TASK_SANDBOX_DISK < 16 * 2**20:
    raise ImproperlyConfigured("BELVEDIR_TASK_SANDBOX_DISK must be 0 or at least 16M")
BELVEDIR_CLONE_TIMEOUT = envint("BELVEDIR_CLONE_TIMEOUT", 300, minimum=5)
BELVEDIR_REPO_MAX_BYTES = envint("BELVEDIR_REPO_MAX_BYTES", 500 * 1024 * 1024, minimum=1024)
if Q_CLUSTER["timeout"] < BELVEDIR_RUN_TIMEOUT + 4 * BELVEDIR_CLONE_TIMEOUT:
    raise ImproperlyConfigured(
        "Q_TIMEOUT must exceed BELVEDIR_RUN_TIMEOUT plus the clone budget (4 x BELVEDIR_CLONE_TIMEOUT),"
        " or django-q2 kills workers in the middle of runs"
    )
BELVEDIR_QUEUED_STALE = envint("BELVEDIR_QUEUED_STALE", 600, minimum=5)
BELVEDIR_INGEST_MAX_BYTES = envint("BELVEDIR_INGEST_MAX_BYTES", 5 * 1024 * 1024, minimum=1024)
BELVEDIR_INGEST_MAX_SPANS = envint("BELVEDIR_INGEST_MAX_SPANS", 1000, minimum=1)
BELVEDIR_INGEST_CONCURRENCY = envint("BELVEDIR_INGEST_CONCURRENCY", 16, minimum=1)
BELVEDIR_TASKS_QUIET_SECONDS = envint("BELVEDIR_TASKS_QUIET_SECONDS", 30, minimum=0)
# Environment generation (harnesses/generation.py), a job on the housekeeping cluster: how long
# a job may take, retries included (below that cluster's 600 s timeout), and the output cap.
BELVEDIR_GENERATION_TIMEOUT = envint("BELVEDIR_GENERATION_TIMEOUT", 300, minimum=5)
BELVEDIR_GENERATION_MAX_TOKENS = envint("BELVEDIR_GENERATION_MAX_TOKENS", 16000, minimum=256)
if BELVEDIR_GENERATION_TIMEOUT >= Q_CLUSTER["ALT_CLUSTERS"][Q_HOUSEKEEPING_CLUSTER]["timeout"]:
    raise ImproperlyConfigured("BELVEDIR_GENERATION_TIMEOUT must be below 600 (the job's timeout)")

# Hosted defaults: with BELVEDIR_DEV=0, HTTPS only (`manage.py check --deploy` is clean).
# Sandboxes call the platform at BELVEDIR_SANDBOX_BASE_URL, which may be plain HTTP on a
# private network: their endpoints are exempt from the HTTPS redirect.
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not BELVEDIR_DEV)
SECURE_REDIRECT_EXEMPT = envlist(
    "SECURE_REDIRECT_EXEMPT",
    [
        r"^api/v1/(traces|outcomes|chat/completions|models)$",
        r"^api/v1/runs/[^/]+/tasks$",
        r"^api/v1/adapters/",
        r"^git/",
    ],
)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not BELVEDIR_DEV)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not BELVEDIR_DEV)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if BELVEDIR_DEV else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not BELVEDIR_DEV)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not BELVEDIR_DEV)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto.
if envbool("BELVEDIR_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy (django-csp), on every response: scripts and styles come only from
# our own static files (no inline script without the request's nonce, no inline style, no
# eval), no plugins, no framing, forms post only here. An operator adds the hosts a CDN or an
# analytics service needs with BELVEDIR_CSP_EXTRA, as `script-src https://stats.example.com;
# connect-src https://stats.example.com` (a directive not listed here starts from 'self').
_CSP_BASE = {
    "default-src": [SELF],
    "script-src": [SELF, NONCE],
    "style-src": [SELF],
    "img-src": [SELF, "data:"],
    "connect-src": [SELF],
    "frame-ancestors": [NONE],
    "base-uri": [SELF],
    "form-action": [SELF],
    "object-src": [NONE],
}
for _directive, _sources in envcsp("BELVEDIR_CSP_EXTRA").items():
    _CSP_BASE[_directive] = [s for s in _CSP_BASE.get(_directive, [SELF]) if s != NONE] + _sources
CONTENT_SECURITY_POLICY = {"DIRECTIVES": _CSP_BASE}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # The router's upstream client would log every model call at INFO.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

# The model router (router/): where covered runs' calls go, with the operator's key.
BELVEDIR_ROUTER_UPSTREAM_BASE = envstr(
    "BELVEDIR_ROUTER_UPSTREAM_BASE", "https://openrouter.ai/api/v1"
).rstrip("/")
BELVEDIR_ROUTER_UPSTREAM_KEY = envstr("BELVEDIR_ROUTER_UPSTREAM_KEY", "")
BELVEDIR_ROUTER_UPSTREAM_TIMEOUT = envfloat("BELVEDIR_ROUTER_UPSTREAM_TIMEOUT", 600.0)
# An answered call's settlement waits at most this long to be written with others' (router/
# settlement.py): fewer, larger writes, at the price of reservations held that much longer.
BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS = max(
    envfloat("BELVEDIR_ROUTER_SETTLE_BATCH_SECONDS", 0.2), 0.0
)
