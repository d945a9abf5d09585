"""Task sandboxes get the run sandboxes' hardening, limits and labels: one of each is launched
and their containers compared as Docker itself reports them (`docker inspect`). Every
difference is either none or one of the documented exceptions below, each with its reason
(docs/task-sandboxes.md, "What a task sandbox is")."""

import secrets
from pathlib import Path

import pytest

from belvedir.sandbox_config import get_backend, instance_id, spec_from_settings
from harbor.containers import build_policy
from harbor.services import task_sandbox_create
from sandboxes import taskd
from sandboxes.base import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_RUN_ID,
    LABEL_TASK_SANDBOX,
    SandboxHandle,
)
from sandboxes.tasks import TASK_CAPABILITIES, ensure_image, step_limits
from sandboxes.volumes import LABEL_VOLUME
from tests.helpers.task_sandboxes import (
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    remove_task_images,
)

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]

CAPABILITY_BITS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "NET_BIND_SERVICE": 10,
}
# HostConfig keys that differ on purpose, and why.
EXCEPTIONS = {
    # Harbor task images expect root and install packages (apt-get, pip): the image's user,
    # with Docker's default capabilities less NET_RAW, MKNOD, AUDIT_WRITE, SETFCAP and
    # SYS_CHROOT. Under gVisor they are capabilities in its user-space kernel, not the host's.
    "CapAdd": "root and a few capabilities in gVisor's kernel",
    # Harbor tasks write anywhere in the image (/usr, /etc, /root): a writable root whose
    # size the run's worker watches (BELVEDIR_TASK_SANDBOX_DISK), not a read-only root with
    # quota-volume folders mounted over it.
    "ReadonlyRootfs": "a writable root, its size watched",
    "Binds": "no quota volume folders; the exec server's binary, read-only",
}
# Config keys that differ on purpose.
CONFIG_EXCEPTIONS = {
    "User": "the image's user (root) instead of 1000:1000",
    "Env": "a run sandbox gets the contract's env; a task sandbox the image's, exec adds more",
    "Cmd": "the run's entrypoint vs the exec server (sandboxes/taskd.py)",
    "Image": "the task's own image",
    "WorkingDir": "the image's WORKDIR vs /workspace",
    "Labels": "compared one by one below",
}
COMPARED = [
    "Runtime",
    "NetworkMode",
    "Memory",
    "MemorySwap",
    "NanoCpus",
    "PidsLimit",
    "CapDrop",
    "SecurityOpt",
    "Privileged",
    "Init",
    "LogConfig",
    "Ulimits",
    "Tmpfs",
    "ShmSize",
    "Devices",
    "DeviceRequests",
    "IpcMode",
    "PidMode",
    "UTSMode",
    "UsernsMode",
    "CgroupnsMode",
    "ExtraHosts",
    "Dns",
    "PublishAllPorts",
    "PortBindings",
    "VolumeDriver",
    "VolumesFrom",
    "OomKillDisable",
    "MaskedPaths",
    "ReadonlyPaths",
    "AutoRemove",
    "RestartPolicy",
    "StorageOpt",
    "Sysctls",
    "GroupAdd",
]


@pytest.fixture
def pair(owner, sandbox_settings, tmp_path):
    """A run sandbox and a task sandbox, launched as the platform launches them. The task's
    image claims the platform's labels for itself (the run sandbox's quota volume, another
    run, not managed): what the platform sets must win."""
    backend = get_backend()
    handle = backend.launch(spec_from_settings(run_id="run_parity", command=["sleep", "60"]))
    api = backend.client.api
    volume = api.inspect_container(handle.id)["Config"]["Labels"][LABEL_VOLUME]
    run, _ = make_managed_run(owner)
    context = tmp_path / "context.tar.gz"
    claims = (
        f"LABEL {LABEL_VOLUME}={volume} {LABEL_RUN_ID}=run_other {LABEL_MANAGED}=0 "
        f"{taskd.LABEL}=chosen-by-the-image\n"
    )
    context.write_bytes(context_tar(fresh_dockerfile() + claims))
    sandbox = task_sandbox_create(run=run, name="parity", context=context)
    try:
        yield api.inspect_container(handle.id), api.inspect_container(sandbox.container_id), run
    finally:
        backend.remove(SandboxHandle(id=sandbox.container_id, run_id=run.pk))
        backend.remove(handle)
        remove_task_images({sandbox.image})


def test_task_sandboxes_have_the_run_sandboxes_hardening_and_limits(pair):
    run_box, task_box, _ = pair
    run_host, task_host = run_box["HostConfig"], task_box["HostConfig"]

    assert run_host["Runtime"] == "runsc"  # gVisor, the network and the limits: as settings give
    assert run_host["NetworkMode"] == "belvedir-sandbox"
    assert run_host["Memory"] == run_host["MemorySwap"] == 2**30  # no swap on top
    assert run_host["NanoCpus"] == 1_000_000_000 and run_host["PidsLimit"] == 512
    assert run_host["CapDrop"] == ["ALL"] and run_host["SecurityOpt"] == ["no-new-privileges"]
    assert run_host["Init"] is True and run_host["Privileged"] is False
    for key in COMPARED:
        assert task_host.get(key) == run_host.get(key), key
    differing = {key for key in run_host.keys() | task_host.keys()}
    differing = {k for k in differing if run_host.get(k) != task_host.get(k)}
    assert differing <= set(EXCEPTIONS), differing - set(EXCEPTIONS)
    assert task_host["CapAdd"] == list(TASK_CAPABILITIES)
    assert not {"SYS_ADMIN", "NET_RAW", "NET_ADMIN", "SYS_PTRACE", "MKNOD"} & set(TASK_CAPABILITIES)

    run_config, task_config = run_box["Config"], task_box["Config"]
    differing = {k for k in run_config.keys() | task_config.keys() if k != "Hostname"}
    # No entrypoint: null in one image, [] in the other (a commit of the build's RUN step).
    differing = {
        k for k in differing if (run_config.get(k) or None) != (task_config.get(k) or None)
    }
    assert differing <= set(CONFIG_EXCEPTIONS) | {"Volumes"}, differing


def test_task_sandboxes_carry_the_platforms_labels_whatever_their_image_says(pair):
    run_box, task_box, run = pair
    labels = task_box["Config"]["Labels"]

    assert labels[LABEL_MANAGED] == "1" and labels[LABEL_RUN_ID] == run.pk
    assert labels[LABEL_INSTANCE] == instance_id() == run_box["Config"]["Labels"][LABEL_INSTANCE]
    assert labels[LABEL_TASK_SANDBOX].startswith("tsb_")
    # The image named the run sandbox's quota volume: removing the task sandbox would have
    # released (unmounted and deleted) another sandbox's disk.
    assert labels[LABEL_VOLUME] == ""
    assert LABEL_TASK_SANDBOX not in run_box["Config"]["Labels"]
    # The exec server's token is the platform's, never one the image chose.
    assert len(labels[taskd.LABEL]) == 64 and labels[taskd.LABEL] != "chosen-by-the-image"
    assert run_box["Config"]["Labels"][taskd.LABEL] == ""  # a run sandbox has no server
    assert f"{taskd.BUILT}:{taskd.MOUNT}:ro" in task_box["HostConfig"]["Binds"]


def test_removing_a_task_sandbox_leaves_the_run_sandboxes_disk_alone(pair):
    run_box, task_box, run = pair
    backend = get_backend()
    volume = run_box["Config"]["Labels"][LABEL_VOLUME]

    backend.remove(SandboxHandle(id=task_box["Id"], run_id=run.pk))

    mounts = Path("/proc/mounts").read_text()
    assert f"/{volume} " in mounts
    code, output = backend.client.containers.get(run_box["Id"]).exec_run(["touch", "/tmp/x"])
    assert code == 0, output


def build_probe(tmp_path, probe: str) -> str:
    """Build a task image whose RUN writes `probe`'s output to /probe, as the platform builds
    task images; /probe."""
    spec = spec_from_settings(
        run_id="run_build", command=["true"], user="", cap_add=TASK_CAPABILITIES
    )
    context = tmp_path / "context.tar.gz"
    context.write_bytes(context_tar(fresh_dockerfile() + f"RUN ({probe}) > /probe\n"))
    tag = f"belvedir-task:probe-{secrets.token_hex(6)}"
    client = get_backend().client
    try:
        ensure_image(
            client,
            context=context,
            tag=tag,
            timeout=300,
            steps=step_limits(spec, {}),
            policy=build_policy("org_probe"),
        )
        return client.containers.run(
            tag, ["cat", "/probe"], remove=True, network_mode="none"
        ).decode()
    finally:
        remove_task_images({tag})


def test_task_image_builds_run_their_RUN_steps_as_a_task_sandbox_runs(sandbox_settings, tmp_path):
    """gVisor's kernel, the sandbox memory limit, root with the task capabilities only."""
    probe = build_probe(
        tmp_path,
        "cat /proc/version; grep MemTotal /proc/meminfo; id -u; grep CapEff /proc/self/status",
    )

    version, memory, uid, caps = probe.splitlines()[:4]
    assert version.startswith("Linux version 4.4.0")  # what gVisor's kernel says
    assert memory.split()[1] == str(2**20)  # kB: sandbox_settings' 1g
    assert uid == "0"
    assert int(caps.split()[1], 16) == sum(1 << CAPABILITY_BITS[c] for c in TASK_CAPABILITIES)
