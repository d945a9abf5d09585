"""Build the sandbox image (`belvedir-sandbox:latest`).

Two recipes behind one entry point, `build_image()`:

- ``dockerfile``: `sandboxes/Dockerfile` on top of `debian:trixie-slim`, for machines
  that reach an image registry;
- ``offline``: `debootstrap` Debian trixie (minbase) from the Debian mirror, customise the
  root filesystem, and `docker import` it. The debootstrapped rootfs is cached as a tarball
  under the cache dir, so a forced rebuild takes seconds, not minutes.

Both produce the same image: git, Python 3 (+ venv, pip, a user-owned venv at /opt/venv first
on PATH), Node + npm, curl, tmux and asciinema (Harbor's terminus-2 agent types into a tmux
session of the task container and records it; offline it cannot install them: about 6 MB), the
host's CA bundle at /etc/ssl/certs/ca-certificates.crt, user
`sandbox` (uid/gid 1000, home /home/sandbox) and a writable /workspace as the workdir.

Run it as `python manage.py sandbox_image`, or standalone as `python -m sandboxes.image`.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docker
import docker.errors
import requests

from sandboxes.base import SandboxError

Recipe = Literal["auto", "offline", "dockerfile"]
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

# A clean environment for commands run inside the chroot (never leak the host's venv).
_CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
}


@dataclass(frozen=True)
class ImageConfig:
    """Where and how to build (`runs.sandbox_config.image_config()` reads the settings)."""

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
        settings read too (Django's view of them is `runs.sandbox_config.image_config()`)."""
        env = os.environ
        return cls(
            image=env.get("BELVEDIR_SANDBOX_IMAGE") or DEFAULT_IMAGE,
            ca_bundle=Path(env.get("BELVEDIR_SANDBOX_CA_BUNDLE") or DEFAULT_CA_BUNDLE),
            cache_dir=Path(env.get("BELVEDIR_CACHE_DIR") or DEFAULT_CACHE_DIR),
            mirror=env.get("BELVEDIR_SANDBOX_DEBIAN_MIRROR") or DEBIAN_MIRROR,
        )


@dataclass(frozen=True)
class BuildResult:
    """What `build_image()` did: `recipe` is "existing" when nothing was built."""

    image: str
    image_id: str
    recipe: str
    seconds: float


def build_image(
    *,
    force: bool = False,
    recipe: Recipe = "auto",
    refresh_rootfs: bool = False,
    config: ImageConfig | None = None,
    client: docker.DockerClient | None = None,
    say: Say = print,
) -> BuildResult:
    """Build the sandbox image unless it exists (or `force`); return what happened.

    `recipe="auto"` uses the Dockerfile when the base image is present or can be pulled,
    else the offline recipe. `refresh_rootfs` ignores the cached debootstrap tarball.
    Raises SandboxError with a readable message on failure.
    """
    cfg = config or ImageConfig.from_env()
    client = client or _client()
    started = time.monotonic()

    existing = _image_id(client, cfg.image)
    if existing and not force:
        say(f"sandbox image: {cfg.image} already exists ({existing[7:19]}); --force rebuilds it")
        return BuildResult(cfg.image, existing, "existing", time.monotonic() - started)

    if not cfg.ca_bundle.is_file():
        raise SandboxError(f"CA bundle {cfg.ca_bundle} does not exist (BELVEDIR_SANDBOX_CA_BUNDLE)")

    if recipe == "auto":
        recipe = "dockerfile" if registry_answers(client, cfg, say=say) else "offline"
    say(f"sandbox image: building {cfg.image} with the {recipe} recipe")
    if recipe == "dockerfile":
        _build_with_dockerfile(client, cfg, say=say, no_cache=refresh_rootfs)
    elif recipe == "offline":
        _build_offline(client, cfg, say=say, refresh_rootfs=refresh_rootfs)
    else:
        raise SandboxError(f"unknown recipe {recipe!r} (auto, offline or dockerfile)")

    image_id = _image_id(client, cfg.image)
    if not image_id:
        raise SandboxError(f"the build finished but {cfg.image} is not in the image list")
    if existing and existing != image_id:
        _remove_untagged(client, existing, say=say)
    seconds = time.monotonic() - started
    say(f"sandbox image: built {cfg.image} ({image_id[7:19]}) in {seconds:.0f}s")
    return BuildResult(cfg.image, image_id, recipe, seconds)


def registry_answers(client: docker.DockerClient, cfg: ImageConfig, *, say: Say = print) -> bool:
    """True when the Dockerfile's base image is here or can be pulled within the timeout."""
    if _image_id(client, cfg.base_image):
        return True
    say(f"sandbox image: trying to pull {cfg.base_image} ({cfg.registry_timeout:.0f}s timeout)")
    repository, tag = _split_tag(cfg.base_image)
    probe = _client(timeout=cfg.registry_timeout)
    try:
        for event in probe.api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                say(f"sandbox image: no registry ({event['error']})")
                return False
    except (docker.errors.DockerException, requests.RequestException) as exc:
        say(f"sandbox image: no registry ({_short(exc)})")
        return False
    finally:
        probe.close()
    return bool(_image_id(client, cfg.base_image))


def image_env_changes() -> list[str]:
    """The `docker import --change` lines that give the offline image its metadata."""
    return [
        *(f"ENV {key}={value}" for key, value in IMAGE_ENV.items()),
        "LABEL belvedir.sandbox.recipe=offline",
        f"USER {SANDBOX_UID}:{SANDBOX_GID}",
        f"WORKDIR {WORKSPACE}",
        'CMD ["/bin/bash"]',
    ]


# --- the Dockerfile recipe ---------------------------------------------------------------


def _build_with_dockerfile(
    client: docker.DockerClient, cfg: ImageConfig, *, say: Say, no_cache: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="belvedir-sandbox-ctx-") as ctx:
        shutil.copyfile(DOCKERFILE, Path(ctx) / "Dockerfile")
        shutil.copyfile(cfg.ca_bundle, Path(ctx) / "ca-certificates.crt")
        shutil.copyfile(VENV_CONSTRAINTS, Path(ctx) / VENV_CONSTRAINTS.name)
        copy_node_sdk(Path(ctx) / "node-sdk")
        try:
            events = client.api.build(
                path=ctx,
                tag=cfg.image,
                rm=True,
                forcerm=True,
                nocache=no_cache,
                decode=True,
                buildargs={"BASE_IMAGE": cfg.base_image},
            )
            for event in events:
                if "error" in event:
                    raise SandboxError(f"docker build failed: {event['error'].strip()}")
                line = str(event.get("stream", "")).rstrip()
                if line.startswith("Step ") or line.startswith("Successfully"):
                    say(f"sandbox image: {line}")
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"docker build failed: {_short(exc)}") from exc


# --- the offline recipe ------------------------------------------------------------------


def _build_offline(
    client: docker.DockerClient, cfg: ImageConfig, *, say: Say, refresh_rootfs: bool
) -> None:
    for tool in ("debootstrap", "tar", "chroot"):
        if not shutil.which(tool):
            raise SandboxError(f"{tool} is missing; run scripts/ensure-docker.sh (as root)")
    if os.geteuid() != 0:
        raise SandboxError("the offline recipe needs root (debootstrap and chroot)")

    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    cached = cfg.cache_dir / f"sandbox-rootfs-{cfg.suite}-{_rootfs_key(cfg)}.tar"
    with _scratch_dir(cfg.cache_dir) as work:
        root = work / "rootfs"
        root.mkdir()
        if cached.is_file() and not refresh_rootfs:
            say(f"sandbox image: unpacking the cached rootfs {cached}")
            _run(["tar", "--numeric-owner", "--xattrs", "-xpf", str(cached), "-C", str(root)])
        else:
            _debootstrap(root, cfg, say=say)
            _install_packages(root, say=say)
            say(f"sandbox image: caching the rootfs as {cached}")
            partial = cached.with_suffix(".tar.partial")
            _tar(root, partial)
            partial.replace(cached)

        say(
            "sandbox image: adding the CA bundle, user sandbox (1000), /workspace, /opt/venv,"
            f" the Node SDK in {NODE_MODULES}"
        )
        _customise_rootfs(root, cfg)

        say("sandbox image: packing the rootfs")
        archive = work / "image.tar"
        _tar(root, archive)
        say(f"sandbox image: docker import -> {cfg.image}")
        repository, tag = _split_tag(cfg.image)
        try:
            client.api.import_image(
                src=str(archive),
                repository=repository,
                tag=tag,
                changes=image_env_changes(),
            )
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"docker import failed: {_short(exc)}") from exc


def _debootstrap(root: Path, cfg: ImageConfig, *, say: Say) -> None:
    """debootstrap a minimal suite into `root`, printing one line per phase.

    Only ca-certificates is included here: debootstrap's own resolver cannot satisfy npm's
    dependencies in trixie, so `_install_packages` adds the rest with apt-get.
    """
    command = [
        "debootstrap",
        "--variant=minbase",
        "--include=ca-certificates",
        "--components=main",
        cfg.suite,
        str(root),
        cfg.mirror,
    ]
    say(f"sandbox image: {' '.join(command)}")
    tail: collections.deque[str] = collections.deque(maxlen=40)
    seen_verbs: set[str] = set()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip()
                tail.append(line)
                # One line per phase ("I: Retrieving apt 3.0.4" stands for all retrievals).
                verb = line.split()[1] if line.startswith("I: ") and " " in line[3:] else line
                if verb not in seen_verbs:
                    seen_verbs.add(verb)
                    say(f"sandbox image:   {line}")
        returncode = proc.returncode
    finally:
        _unmount_below(root)
    if returncode != 0:
        log = root / "debootstrap" / "debootstrap.log"
        details = "\n".join(tail)
        if log.is_file():
            details += "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise SandboxError(f"debootstrap failed (exit {returncode}):\n{details}")


def _install_packages(root: Path, *, say: Say) -> None:
    """apt-get install PACKAGES inside the rootfs, then drop the package cache."""
    say(f"sandbox image: apt-get install {' '.join(PACKAGES)}")
    with _proc_mounted(root):
        _chroot(root, ["apt-get", "update", "-q"])
        output = _chroot(
            root, ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
        )
        _chroot(root, ["apt-get", "clean"])
    summary = [line for line in output.splitlines() if "newly installed" in line]
    if summary:
        say(f"sandbox image:   {summary[0].strip()}")


def _customise_rootfs(root: Path, cfg: ImageConfig) -> None:
    """Put in the host CA bundle, user sandbox, /workspace and /opt/venv; tidy up."""
    ca_target = root / IMAGE_CA_PATH.lstrip("/")
    ca_target.parent.mkdir(parents=True, exist_ok=True)
    ca_target.unlink(missing_ok=True)
    shutil.copyfile(cfg.ca_bundle, ca_target)
    ca_target.chmod(0o644)

    ids = f"{SANDBOX_UID}:{SANDBOX_GID}"
    with _proc_mounted(root):
        _chroot(root, ["groupadd", "--gid", str(SANDBOX_GID), "sandbox"])
        _chroot(
            root,
            ["useradd", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
            + ["--home-dir", SANDBOX_HOME, "--create-home", "--shell", "/bin/bash", "sandbox"],
        )
        _chroot(root, ["install", "-d", "-o", "1000", "-g", "1000", "-m", "0755", WORKSPACE])
        _chroot(root, ["python3", "-m", "venv", "/opt/venv"])
        shutil.copyfile(VENV_CONSTRAINTS, root / "tmp" / VENV_CONSTRAINTS.name)
        _chroot(
            root,
            ["/opt/venv/bin/pip", "install", "-q", "--no-cache-dir"]
            + ["-c", f"/tmp/{VENV_CONSTRAINTS.name}", *VENV_PACKAGES],
            env={**_CHROOT_ENV, **_pip_env(root)},
        )
        _chroot(root, ["chown", "-R", ids, "/opt/venv"])
        copy_node_sdk(root / "tmp" / "node-sdk")
        _chroot(root, ["sh", "-c", NODE_SDK_INSTALL], env={**_CHROOT_ENV, **_proxy_env()})

    # Docker provides these at run time; the host's copies must not leak into the image.
    for name in ("etc/resolv.conf", "etc/hostname"):
        (root / name).write_text("")
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*", "tmp/*"):
        for path in root.glob(pattern):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    shutil.rmtree(root / "debootstrap", ignore_errors=True)


def _chroot(root: Path, command: list[str], env: dict[str, str] | None = None) -> str:
    return _run(["chroot", str(root), *command], env=env or _CHROOT_ENV)


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


def _proxy_env() -> dict[str, str]:
    """The host's proxy settings, when it has them."""
    kept = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
    return {name: os.environ[name] for name in kept if name in os.environ}


def _pip_env(root: Path) -> dict[str, str]:
    """pip inside the rootfs: the host's CA bundle (copied in) for a TLS-intercepting proxy,
    the host's proxy and index settings when it has them."""
    env = _proxy_env()
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        if os.environ.get(name, "").startswith("http"):
            env[name] = os.environ[name]
    return {**env, "PIP_CERT": IMAGE_CA_PATH, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@contextmanager
def _proc_mounted(root: Path) -> Iterator[None]:
    """/proc mounted inside the rootfs for package scripts; unmounted whatever happens."""
    target = root / "proc"
    target.mkdir(exist_ok=True)
    _run(["mount", "-t", "proc", "proc", str(target)])
    try:
        yield
    finally:
        _unmount_below(root)


def _tar(root: Path, out: Path) -> None:
    _run(
        ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", str(root)]
        + ["-cf", str(out), "."]
    )


def _rootfs_key(cfg: ImageConfig) -> str:
    recipe = "|".join([cfg.suite, cfg.mirror, platform.machine(), *PACKAGES])
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


@contextmanager
def _scratch_dir(parent: Path) -> Iterator[Path]:
    """A work dir next to the cache (same disk); removed afterwards, never through a mount."""
    work = Path(tempfile.mkdtemp(prefix="build-", dir=parent))
    try:
        yield work
    finally:
        _unmount_below(work)
        if _mounts_below(work):
            raise SandboxError(f"{work} still has mounts below it; remove it by hand")
        shutil.rmtree(work, ignore_errors=True)


def _mounts_below(path: Path) -> list[str]:
    prefix = str(path.resolve()).rstrip("/") + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    return [point for point in points if point.startswith(prefix)]


def _unmount_below(path: Path) -> None:
    for point in sorted(_mounts_below(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def _run(command: list[str], env: dict[str, str] | None = None) -> str:
    """Run a command, return its stdout; SandboxError with the output tail on failure."""
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        output = (result.stderr.strip() or result.stdout.strip())[-2000:]
        raise SandboxError(f"`{' '.join(command)}` failed (exit {result.returncode}): {output}")
    return result.stdout


# --- helpers -----------------------------------------------------------------------------


def _client(timeout: float | None = None) -> docker.DockerClient:
    try:
        if timeout is None:
            return docker.from_env()
        return docker.from_env(timeout=int(max(1, timeout)))
    except docker.errors.DockerException as exc:
        raise SandboxError(
            f"cannot reach the Docker engine ({_short(exc)}); run scripts/ensure-docker.sh"
        ) from exc


def _image_id(client: docker.DockerClient, name: str) -> str | None:
    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        return None
    except (docker.errors.DockerException, requests.RequestException) as exc:
        raise SandboxError(f"cannot inspect image {name}: {_short(exc)}") from exc


def _remove_untagged(client: docker.DockerClient, image_id: str, *, say: Say) -> None:
    """Drop the image a rebuild replaced, unless it is still tagged or used by a container."""
    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
            say(f"sandbox image: removed the previous image {image_id[7:19]}")
    except (docker.errors.DockerException, requests.RequestException):
        pass


def _split_tag(name: str) -> tuple[str, str]:
    """ "registry:5000/repo:tag" -> ("registry:5000/repo", "tag"); the tag defaults to latest."""
    repository, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return name, "latest"
    return repository, tag


def _short(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip()[:300]


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: `python -m sandboxes.image [--force] [--offline]`."""
    parser = argparse.ArgumentParser(description="Build the Belvedir sandbox image.")
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--offline", action="store_true", help="debootstrap + docker import")
    group.add_argument("--dockerfile", action="store_true", help="docker build (needs a registry)")
    parser.add_argument("--refresh-rootfs", action="store_true", help="ignore cached rootfs")
    args = parser.parse_args(argv)
    recipe: Recipe = "offline" if args.offline else "dockerfile" if args.dockerfile else "auto"
    try:
        build_image(force=args.force, recipe=recipe, refresh_rootfs=args.refresh_rootfs)
    except SandboxError as exc:
        print(f"sandbox image: ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
