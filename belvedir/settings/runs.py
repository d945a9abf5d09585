"""Runs: their time, caps, repositories, reaper, prices, and the managed Harbor workspace."""

import re

from django.core.exceptions import ImproperlyConfigured

from belvedir.env import envbool, envfloat, envint, envlist, envsize, envstr
from belvedir.settings.jobs import Q_CLUSTER
from belvedir.settings.sandboxes import BELVEDIR_SANDBOX_IMAGE

# The Harbor export (`belvedir environments export`, docs/harbor.md):
# the image every exported task's Dockerfile builds FROM (it needs python3). An offline install
# points it at a local image, e.g. belvedir-sandbox:latest.
BELVEDIR_EXPORT_BASE_IMAGE = envstr("BELVEDIR_EXPORT_BASE_IMAGE", "python:3.13-slim")
# Harbor agents that image already holds (comma-separated agent names: claude-code in the image
# `make claude-code-image` builds): the export says so in every task.toml, and the Harbor
# driver then runs that agent on an offline install instead of refusing it (docs/harbor.md).
BELVEDIR_EXPORT_BASE_AGENTS = envlist("BELVEDIR_EXPORT_BASE_AGENTS", [])
if any(not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name) for name in BELVEDIR_EXPORT_BASE_AGENTS):
    raise ImproperlyConfigured(
        "BELVEDIR_EXPORT_BASE_AGENTS must be comma-separated Harbor agent names (claude-code)"
    )
# The image a Harbor harness's run sandbox runs in (the sandbox image plus the pinned Harbor and
# docker compose v2), built by `make harbor-image` (scripts/harbor-image.sh).
BELVEDIR_HARBOR_IMAGE = envstr("BELVEDIR_HARBOR_IMAGE", "belvedir-harbor:0.26.0")

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
# Warm task sandboxes (harbor/warm.py): 1 (default) starts a managed Harbor run's task
# containers ahead from its harness's last run's images; 0 turns them off.
BELVEDIR_TASK_SANDBOX_WARM = envint("BELVEDIR_TASK_SANDBOX_WARM", 1, minimum=0) > 0
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
# A task sandbox's commands by an exec server inside its container (sandboxes/taskd.py,
# docs/task-sandboxes.md): "on" the static binary `make taskd` builds, "off" every command by
# `docker exec`, or the path of a build of sandboxes/taskd.c of one's own.
BELVEDIR_TASK_EXEC_SERVER = envstr("BELVEDIR_TASK_EXEC_SERVER", "on")
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
