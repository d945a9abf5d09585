"""Sandboxes: their network and gateway, runtime, disk, warm pool, shape, image, GPUs."""

import re

from django.core.exceptions import ImproperlyConfigured

from belvedir.env import (
    envbool,
    envfloat,
    envgpus,
    envgpushapes,
    envint,
    envlist,
    envsize,
    envstr,
)
from belvedir.settings.core import BELVEDIR_BASE_URL
from sandboxes.config import BUILTIN_BACKENDS

# Sandbox isolation (docs/isolation.md): sandboxes join the bridge network
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
# "none": sandboxes reach nothing but the platform (and ALLOW_CIDRS), as on an offline host.
BELVEDIR_SANDBOX_EGRESS = envstr("BELVEDIR_SANDBOX_EGRESS", "internet")
if BELVEDIR_SANDBOX_EGRESS not in ("internet", "none"):
    raise ImproperlyConfigured("BELVEDIR_SANDBOX_EGRESS must be internet or none")
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
# How long a run whose sandbox finds no room on the disk (its quota volume promised in full,
# keeping BELVEDIR_MIN_FREE_DISK) waits for other sandboxes to end before it fails (0: fails at
# once); its log says it waits.
BELVEDIR_DISK_ROOM_WAIT = envint("BELVEDIR_DISK_ROOM_WAIT", 600, minimum=0)
# Quota volumes a worker host keeps made ahead for the next sandboxes (0: none); an unused
# one is released by the reaper after 10 minutes. Each counts against BELVEDIR_MIN_FREE_DISK.
BELVEDIR_SANDBOX_SPARE_VOLUMES = envint("BELVEDIR_SANDBOX_SPARE_VOLUMES", 1, minimum=0)
# Sandboxes of the default shape a worker host keeps started ahead (0: none), so a run skips
# the sandbox's start (~450 ms under gVisor); each holds its memory and a quota volume while it
# waits (given back to a run that finds no room on the disk), and is replaced after
# BELVEDIR_SANDBOX_WARM_MAX_AGE seconds unused (sandboxes/warm.py). Two: a launch right
# after a run's end takes the second while the first one's successor is being made.
BELVEDIR_SANDBOX_WARM = envint("BELVEDIR_SANDBOX_WARM", 2, minimum=0)
# The install cache (docs/operating.md#the-install-cache): what each worker host keeps of
# install snapshots, all organizations together, least recently used evicted first (0: no
# cache). A harness turns it off with BELVEDIR_INSTALL_CACHE=off in its env.
BELVEDIR_INSTALL_CACHE_BYTES = envsize("BELVEDIR_INSTALL_CACHE_BYTES", 20 * 2**30, minimum=0)
BELVEDIR_SANDBOX_WARM_MAX_AGE = envint("BELVEDIR_SANDBOX_WARM_MAX_AGE", 3600, minimum=60)
BELVEDIR_SANDBOX_IMAGE = envstr("BELVEDIR_SANDBOX_IMAGE", "belvedir-sandbox:latest")
# The sandbox backend (sandboxes/config.py backend_for): "docker", or `package.module:Class`
# for a backend of one's own, made by its from_config(config) (docs/scaling.md).
BELVEDIR_SANDBOX_BACKEND = envstr("BELVEDIR_SANDBOX_BACKEND", "docker")
if BELVEDIR_SANDBOX_BACKEND not in BUILTIN_BACKENDS and not re.match(
    r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", BELVEDIR_SANDBOX_BACKEND
):
    raise ImproperlyConfigured(
        f"BELVEDIR_SANDBOX_BACKEND must be {' or '.join(BUILTIN_BACKENDS)} or "
        f"package.module:Class, not {BELVEDIR_SANDBOX_BACKEND!r}"
    )
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
# GPU runs (docs/operating.md): the GPU types this platform's workers serve and how many
# devices of each a worker host has (`a10g:1,a100:2`); a GPU harness of another type is
# refused at launch. A GPU worker host runs one cluster per type (Q_CLUSTER_NAME=gpu-a10g), as
# many workers as devices, and gives each run one device (Docker device ids 0, 1, … in the
# order listed). BELVEDIR_GPU_SIMULATE=1 (development, tests): devices are claimed the same
# way but no device is requested from Docker (sandboxes run without a GPU).
BELVEDIR_GPU_TYPES = envgpus("BELVEDIR_GPU_TYPES")
BELVEDIR_GPU_SIMULATE = envbool("BELVEDIR_GPU_SIMULATE", False)
# Each GPU type's sandbox shape (sandboxes/gpu.py: defaults for an 8B model under vLLM), and
# the Docker runtime GPU sandboxes run under: gVisor with --nvproxy registered under this name
# (`make machine` registers runsc-gpu: scripts/runsc-runtimes.py), or runc (a warning). A GPU
# worker host checks both, the driver and nvidia-container-toolkit at start (belvedir/gpu_host.py).
BELVEDIR_GPU_SHAPES = envgpushapes("BELVEDIR_GPU_SHAPES")
BELVEDIR_GPU_RUNTIME = envstr("BELVEDIR_GPU_RUNTIME", "runsc-gpu")
# The image GPU runs' sandboxes start from (blank: BELVEDIR_SANDBOX_IMAGE): one built on it
# with a C compiler and Python's headers, which vLLM's Triton kernels compile with at run time.
BELVEDIR_GPU_IMAGE = envstr("BELVEDIR_GPU_IMAGE", "")
# This worker host's name for its GPU devices (two hosts may not share one); the host name
# by default.
BELVEDIR_WORKER_HOST = envstr("BELVEDIR_WORKER_HOST", "")
