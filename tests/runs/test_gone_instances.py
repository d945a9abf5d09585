"""Nothing holds a host's disk for a platform instance that is gone (sandboxes/instances.py):
each instance beats on the host (a heartbeat file under the sandbox data dir) on every reaper
pass, warm fill and launch; any instance's reaper removes the sandboxes of one whose heartbeat
is older than BELVEDIR_INSTANCE_STALE and releases their volumes and its free spares, and never
touches those of an instance whose heartbeat is fresh. A refusal for want of disk names who
holds the promises.

Each test has a data dir of its own (`own_data_dir`) and makes the second platform there: a
backend of another instance on this engine, as a second `make up` on a fresh database is."""

import dataclasses
import os
import re
import time
import uuid

import pytest

from belvedir.sandbox_config import get_backend, warm_template
from runs import contract
from runs.reaper import reap
from sandboxes import diskquota, instances, volumes
from sandboxes.base import SandboxError, tar_files
from sandboxes.docker import DockerBackend
from tests.runs.helpers import exists, second_platform

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def last_beat_ago(platform: DockerBackend, seconds: float) -> None:
    """The platform's last heartbeat on this host `seconds` ago (it stopped then)."""
    then = time.time() - seconds
    os.utime(instances.heartbeat_file(platform.data_dir, platform.instance), (then, then))


def a_run_spec():
    return dataclasses.replace(
        warm_template(),
        run_id=f"run_gone{uuid.uuid4().hex[:6]}",
        command=["/bin/true"],
        workspace=tar_files({"a.txt": b"a"}),
    )


def test_a_stopped_platforms_warm_sandbox_and_spare_are_reaped_and_a_refused_launch_starts(
    own_data_dir, warm_settings
):
    warm_settings.BELVEDIR_SANDBOX_WARM = 0  # this platform waits with nothing: the disk is theirs
    # Volumes large enough that what other work on the host writes meanwhile (the free disk is
    # the host's) stays well inside the half volume of room this test leaves: they are sparse.
    size = warm_settings.BELVEDIR_SANDBOX_DISK = 20 * 2**30
    stale = warm_settings.BELVEDIR_INSTANCE_STALE
    backend = get_backend()
    backend.spare_volumes = 0
    theirs = second_platform(own_data_dir)
    [waiting] = theirs.pool.fill()
    spare = volumes.make_spare(
        theirs.client,
        image=warm_template().image,
        workdir=contract.WORKSPACE,
        data_dir=own_data_dir,
        size_bytes=size,
        reserve_bytes=0,
        keep=1,
        owner=theirs.instance,
    )
    assert spare in diskquota.volume_names(root=own_data_dir)
    free = diskquota.free_disk_bytes(own_data_dir)
    promised = diskquota.committed_bytes(root=own_data_dir)
    # Room for one more volume only once one of theirs is given back.
    backend.reserve_bytes = free - promised - size // 2
    handle = None
    try:
        # While they are alive, their sandbox and spare are theirs: the launch is refused, and
        # says who holds the disk.
        with pytest.raises(SandboxError, match="too full to start a sandbox") as refused:
            backend.launch(a_run_spec())
        assert f"instance {theirs.instance}'s sandboxes (last seen alive here" in str(refused.value)
        assert re.search(r"spare volumes \d+\.\d GiB", str(refused.value))
        last_beat_ago(theirs, stale - 120)
        assert reap()["gone_removed"] == []
        assert exists(waiting) and spare in diskquota.volume_names(root=own_data_dir)

        # They stopped longer ago than the stale period: the next pass takes their disk back.
        last_beat_ago(theirs, stale + 60)
        assert reap()["gone_removed"] == [waiting]
        assert not exists(waiting)
        assert diskquota.volume_names(root=own_data_dir) == []
        assert theirs.pool.members() == []
        handle = backend.launch(a_run_spec())
        assert exists(handle.id)
    finally:
        if handle is not None:
            backend.remove(handle)
        theirs.pool.remove(waiting)


def test_a_live_platforms_warm_and_running_sandboxes_are_never_reaped(own_data_dir, warm_settings):
    warm_settings.BELVEDIR_SANDBOX_WARM = 0
    theirs = second_platform(own_data_dir)
    [taken] = theirs.pool.fill()
    assert theirs.pool.take("run_theirs").id == taken  # a run of theirs runs in it
    [waiting] = theirs.pool.fill()
    last_beat_ago(theirs, warm_settings.BELVEDIR_INSTANCE_STALE - 120)  # their reaper is late
    try:
        result = reap()
        assert result["gone_removed"] == [] and result["removed"] == 0
        assert exists(taken) and exists(waiting)
        assert {m.id for m in theirs.pool.members()} == {taken, waiting}
        assert theirs.pool.claimed_by(taken) == "run_theirs"
    finally:
        theirs.pool.remove(taken)
        theirs.pool.remove(waiting)


def test_what_a_platform_that_never_beat_left_is_reaped_once_older_than_the_stale_period(
    own_data_dir, warm_settings
):
    """A platform that ran before heartbeats existed (the warm sandboxes on a host upgraded)."""
    warm_settings.BELVEDIR_SANDBOX_WARM = 0
    theirs = second_platform(own_data_dir)
    [waiting] = theirs.pool.fill()
    instances.heartbeat_file(own_data_dir, theirs.instance).unlink()
    ours = get_backend()
    try:
        assert ours.sweep_gone_instances() == []  # younger than the stale period
        ours.instance_stale = 1
        time.sleep(2.1)  # the engine's creation times are whole seconds
        assert ours.sweep_gone_instances() == [waiting]
        assert not exists(waiting)
        assert diskquota.volume_names(root=own_data_dir) == []
    finally:
        theirs.pool.remove(waiting)
