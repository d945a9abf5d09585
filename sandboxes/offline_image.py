"""The sandbox image's offline recipe (`sandboxes.image`, for machines no image registry
answers): debootstrap Debian minbase into a root filesystem (cached by its packages), install
the packages, add the CA bundle, the sandbox user, /workspace and /opt/venv in a chroot, and
`docker import` it with the image's config. Needs root. Pure Python, no Django.
"""

from __future__ import annotations

import collections
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors
import requests

from sandboxes.base import SandboxError
from sandboxes.image_recipe import (
    IMAGE_CA_PATH,
    NODE_MODULES,
    NODE_SDK_INSTALL,
    PACKAGES,
    SANDBOX_GID,
    SANDBOX_HOME,
    SANDBOX_UID,
    VENV_CONSTRAINTS,
    VENV_PACKAGES,
    WORKSPACE,
    ImageConfig,
    Say,
    copy_node_sdk,
    image_env_changes,
    short,
    split_tag,
)

# A clean environment for commands run inside the chroot (never leak the host's venv).
_CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
}


def build_offline(
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
        repository, tag = split_tag(cfg.image)
        try:
            client.api.import_image(
                src=str(archive),
                repository=repository,
                tag=tag,
                changes=image_env_changes(),
            )
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"docker import failed: {short(exc)}") from exc


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
