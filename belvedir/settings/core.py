"""The core: secrets, hosts, apps, middleware, templates, static and media files, logging."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envbool, envlist, envsize, envstr
from belvedir.secret_files import secret_file_once

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEBUG = envbool("DEBUG", False)
# Development mode (the default, for `make up` and tests) may use built-in secrets; with
# BELVEDIR_DEV=0 every secret must be given, or the start-up stops here.
BELVEDIR_DEV = envbool("BELVEDIR_DEV", True)
# Outside development each secret is at least this long.
_SECRET_MIN_CHARS = 32


def _secret(name: str) -> str:
    value = envstr(name, "")
    if value:
        if not BELVEDIR_DEV and len(value) < _SECRET_MIN_CHARS:
            raise ImproperlyConfigured(f"{name} must be at least {_SECRET_MIN_CHARS} characters")
        return value
    if not BELVEDIR_DEV:
        raise ImproperlyConfigured(f"{name} must be set when BELVEDIR_DEV is off")
    return f"dev-insecure-{name.lower()}"


# The instance's own files (development secrets, uploads, `make up`'s logs and demo repo):
# var/ of the checkout unless BELVEDIR_VAR_DIR moves them (a second instance on one checkout,
# as the end-to-end test of `make up` starts one).
BELVEDIR_VAR_DIR = Path(envstr("BELVEDIR_VAR_DIR", str(BASE_DIR / "var")))
# In development an unset SECRET_KEY is a random one made once and kept in this file (mode
# 0600, never printed), so sessions and signed URLs outlive a `make up` restart.
BELVEDIR_SECRET_KEY_FILE = Path(
    envstr("BELVEDIR_SECRET_KEY_FILE", str(BELVEDIR_VAR_DIR / "secret_key"))
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
if not BELVEDIR_DEV and any(len(k) < _SECRET_MIN_CHARS for k in FIELD_ENCRYPTION_KEYS):
    raise ImproperlyConfigured(
        f"each FIELD_ENCRYPTION_KEY key must be at least {_SECRET_MIN_CHARS} characters"
    )
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
    "harbor",
    "scores",
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

# Where the platform is reached (links it hands out; the sandboxes' base with host networking).
BELVEDIR_BASE_URL = envstr("BELVEDIR_BASE_URL", "http://127.0.0.1:8000")

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
MEDIA_ROOT = envstr("BELVEDIR_MEDIA_ROOT", str(BELVEDIR_VAR_DIR / "media"))
# The largest LoRA adapter zip accepted, as uploaded and in total unpacked.
BELVEDIR_ADAPTER_MAX_BYTES = envsize("BELVEDIR_ADAPTER_MAX_BYTES", 2 * 2**30, minimum=1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # The router's upstream client would log every model call at INFO.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
