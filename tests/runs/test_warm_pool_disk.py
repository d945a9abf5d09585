"""The warm pool and the host's disk: each waiting sandbox holds a quota volume, promised in
full like a run's (sandboxes/diskquota.py check_room), so when a run's sandbox finds no room
the waiting ones are removed for it rather than the run failing beside them.

The host may hold what other platforms left (a machine where `make up` ran before): another
live instance's warm sandbox and the records of warm sandboxes removed since. The test makes
both in a data dir of its own, and neither changes what this instance's pool holds or gives."""

import dataclasses
import json
import time
import uuid

import pytest

from belvedir.sandbox_config import get_backend, warm_template
from sandboxes import diskquota, warm
from sandboxes.base import SandboxError, SandboxSpec, tar_files
from tests.runs.helpers import exists, filled, second_platform

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def a_record_of_a_removed_member(pool: warm.WarmPool, key: str) -> str:
    """A `.ready` file as a warm sandbox removed without its records leaves (an old platform's)."""
    gone_id = uuid.uuid4().hex * 2
    record = warm.Member(
        id=gone_id,
        name="belvedir-gone",
        key=key,
        image_id="sha256:gone",
        workdir="/nonexistent",
        volume="belvedir-gone",
        created=time.time() - 3 * warm.MAKING_GRACE_SECONDS,
    )
    pool.dir.mkdir(parents=True, exist_ok=True)
    (pool.dir / f"{gone_id}.ready").write_text(json.dumps(dataclasses.asdict(record)))
    return gone_id


def test_waiting_sandboxes_give_their_disk_to_a_run_that_finds_no_room(own_data_dir, warm_settings):
    # Volumes large enough that what other work on the host writes meanwhile (the free disk is
    # the host's) stays well inside the half volume of room this test leaves: they are sparse.
    warm_settings.BELVEDIR_SANDBOX_DISK = 20 * 2**30
    backend = get_backend()
    backend.spare_volumes = 0  # every volume below is made under check_room's eye
    other = second_platform(own_data_dir)
    [theirs] = other.pool.fill()
    a_record_of_a_removed_member(backend.pool, key=other.pool.key)
    member = filled(backend)
    size = warm_settings.BELVEDIR_SANDBOX_DISK
    free = diskquota.free_disk_bytes(backend.data_dir)
    promised = diskquota.committed_bytes(root=backend.data_dir)
    # Room for half a volume more: a new one fits only once the member's promise is given back.
    backend.reserve_bytes = free - promised - size // 2

    def other_shape() -> SandboxSpec:  # not the pool's shape: it cannot take the member
        return dataclasses.replace(
            warm_template(),
            run_id=f"run_disk{uuid.uuid4().hex[:6]}",
            memory="512m",
            command=["/bin/true"],
            workspace=tar_files({"a.txt": b"a"}),
        )

    handle = backend.launch(other_shape())
    try:
        assert not exists(member.id)
        assert backend.pool.members() == []
        # Nothing of this pool waits any more to give way: the next one is refused, as without
        # a pool; the live other platform's waiting sandbox is its own, and stays.
        with pytest.raises(SandboxError, match="too full to start a sandbox"):
            backend.launch(other_shape())
        assert exists(theirs)
    finally:
        backend.remove(handle)
        other.pool.remove(theirs)
