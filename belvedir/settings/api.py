"""The REST API (DRF, its rate, the OpenAPI schema) and trace ingest's limits."""

from belvedir.env import envint, envrate

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
        "TaskSandboxStatusEnum": "harbor.models.TaskSandboxStatus",
    },
}

# Trace ingest (POST /api/v1/traces) and the job that forms tasks once sessions go quiet.
BELVEDIR_INGEST_MAX_BYTES = envint("BELVEDIR_INGEST_MAX_BYTES", 5 * 1024 * 1024, minimum=1024)
BELVEDIR_INGEST_MAX_SPANS = envint("BELVEDIR_INGEST_MAX_SPANS", 1000, minimum=1)
BELVEDIR_INGEST_CONCURRENCY = envint("BELVEDIR_INGEST_CONCURRENCY", 16, minimum=1)
BELVEDIR_TASKS_QUIET_SECONDS = envint("BELVEDIR_TASKS_QUIET_SECONDS", 30, minimum=0)
