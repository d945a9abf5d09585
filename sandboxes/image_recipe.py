"""What the sandbox image is made of, shared by both recipes (`sandboxes.image` builds with the
Dockerfile, `sandboxes.offline_image` without a registry): its packages, user, environment and
the Node SDK it installs, and where and how to build (`ImageConfig`)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandboxes.base import SandboxError

Say = Callable[[str], None]

DEFAULT_IMAGE = "belvedir-sandbox:latest"
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DEFAULT_CACHE_DIR = "/var/cache/belvedir"
DEBIAN_SUITE = "trixie"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_IMAGE = "debian:trixie-slim"
DOCKERFILE = Path(__file__).with_name("Dockerfile")

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_HOME = "/home/sandbox"
WORKSPACE = "/workspace"
IMAGE_CA_PATH = "/etc/ssl/certs/ca-certificates.crt"

# Debian packages in the image (the Dockerfile lists the same ones).
PACKAGES = (
    "asciinema",
    "ca-certificates",
    "curl",
    "git",
    "nodejs",
    "npm",
    "procps",
    "python-is-python3",
    "python3",
    "python3-pip",
    "python3-venv",
    "tmux",
)

# Python packages baked into /opt/venv at build time (the build reaches PyPI; sandboxes may not):
# the belvedir SDK, so the platform's Belvedir Runner traces on an offline install. The
# Dockerfile's `pip install` line must list the same ones (a test checks).
VENV_PACKAGES = ("belvedir==0.6.4",)
# Their dependency tree pinned, so pip resolves it without backtracking and builds repeat.
VENV_CONSTRAINTS = Path(__file__).with_name("sdk-constraints.txt")

# The Node SDK (sdk/node/), preinstalled for Node harnesses under both its names (`belvedir`,
# `@fractalresearch/loop`) with its dependency tree from the lockfile (`npm ci --omit=dev`),
# in a global node_modules: on NODE_PATH for require(), and linked as /node_modules, where an
# ES module's `import ... from "belvedir"` finds it from any directory (ESM ignores NODE_PATH).
# A harness's own node_modules comes first. The files copied in; the Dockerfile runs the same
# NODE_SDK_INSTALL (a test checks).
NODE_SDK = Path(__file__).resolve().parents[1] / "sdk" / "node"
NODE_SDK_FILES = ("package.json", "package-lock.json", "README.md", "dist", "scripts/stage.mjs")
NODE_SDK_DIR = "/opt/belvedir-node"
NODE_MODULES = f"{NODE_SDK_DIR}/node_modules"
NODE_SDK_INSTALL = (
    f"install -d {NODE_SDK_DIR}"
    f" && cp /tmp/node-sdk/package.json /tmp/node-sdk/package-lock.json {NODE_SDK_DIR}/"
    f" && cd {NODE_SDK_DIR}"
    f" && NODE_EXTRA_CA_CERTS={IMAGE_CA_PATH} npm ci --omit=dev --ignore-scripts --no-audit"
    " --no-fund --loglevel=error"
    f" && node /tmp/node-sdk/scripts/stage.mjs {NODE_MODULES}"
    f" && ln -s {NODE_MODULES} /node_modules"
    " && rm -rf /tmp/node-sdk /root/.npm"
)

# The image's environment; the Dockerfile's ENV lines must match (a test checks).
IMAGE_ENV = {
    "PATH": "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "VIRTUAL_ENV": "/opt/venv",
    "HOME": SANDBOX_HOME,
    "LANG": "C.UTF-8",
    "SSL_CERT_FILE": IMAGE_CA_PATH,
    "REQUESTS_CA_BUNDLE": IMAGE_CA_PATH,
    "PIP_CERT": IMAGE_CA_PATH,
    "NODE_EXTRA_CA_CERTS": IMAGE_CA_PATH,
    "GIT_SSL_CAINFO": IMAGE_CA_PATH,
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PYTHONUNBUFFERED": "1",
    "NODE_PATH": NODE_MODULES,
}


@dataclass(frozen=True)
class ImageConfig:
    """Where and how to build (`belvedir.sandbox_config.image_config()` reads the settings)."""

    image: str = DEFAULT_IMAGE
    ca_bundle: Path = Path(DEFAULT_CA_BUNDLE)
    cache_dir: Path = Path(DEFAULT_CACHE_DIR)
    mirror: str = DEBIAN_MIRROR
    suite: str = DEBIAN_SUITE
    base_image: str = BASE_IMAGE
    registry_timeout: float = 20.0

    @classmethod
    def from_env(cls) -> ImageConfig:
        """For the standalone entry point: the BELVEDIR_SANDBOX_* environment variables the
        settings read too (Django's view of them is `belvedir.sandbox_config.image_config()`)."""
        env = os.environ
        return cls(
            image=env.get("BELVEDIR_SANDBOX_IMAGE") or DEFAULT_IMAGE,
            ca_bundle=Path(env.get("BELVEDIR_SANDBOX_CA_BUNDLE") or DEFAULT_CA_BUNDLE),
            cache_dir=Path(env.get("BELVEDIR_CACHE_DIR") or DEFAULT_CACHE_DIR),
            mirror=env.get("BELVEDIR_SANDBOX_DEBIAN_MIRROR") or DEBIAN_MIRROR,
        )


LABEL_RECIPE_DIGEST = "belvedir.sandbox.recipe_digest"


def recipe_digest() -> str:
    """A digest of what the image is made of (the Dockerfile, the packages, the environment,
    the SDKs' pins and the Node SDK's files): an image labelled with another digest was built
    from another recipe, so `build_image` builds it again instead of keeping it."""
    digest = hashlib.sha256()
    parts = [DOCKERFILE.read_bytes(), VENV_CONSTRAINTS.read_bytes()]
    parts += [repr((PACKAGES, VENV_PACKAGES, sorted(IMAGE_ENV.items()), NODE_SDK_INSTALL)).encode()]
    for name in NODE_SDK_FILES:
        path = NODE_SDK / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file.is_file():
                parts += [str(file.relative_to(NODE_SDK)).encode(), file.read_bytes()]
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:16]


def image_env_changes() -> list[str]:
    """The `docker import --change` lines that give the offline image its metadata."""
    return [
        *(f"ENV {key}={value}" for key, value in IMAGE_ENV.items()),
        "LABEL belvedir.sandbox.recipe=offline",
        f"LABEL {LABEL_RECIPE_DIGEST}={recipe_digest()}",
        f"USER {SANDBOX_UID}:{SANDBOX_GID}",
        f"WORKDIR {WORKSPACE}",
        'CMD ["/bin/bash"]',
    ]


def copy_node_sdk(target: Path) -> None:
    """The Node SDK's files the image installs from (NODE_SDK_FILES), into `target`."""
    if not (NODE_SDK / "dist").is_dir():
        raise SandboxError(f"{NODE_SDK}/dist is missing (npm run build in sdk/node)")
    for name in NODE_SDK_FILES:
        source, dest = NODE_SDK / name, target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest)
        else:
            shutil.copyfile(source, dest)


def split_tag(name: str) -> tuple[str, str]:
    """ "registry:5000/repo:tag" -> ("registry:5000/repo", "tag"); the tag defaults to latest."""
    repository, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return name, "latest"
    return repository, tag


def short(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip()[:300]
