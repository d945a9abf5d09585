"""The warm pool and the host's disk: each waiting sandbox holds a quota volume, promised in
full like a run's (runs/sandbox/diskquota.py check_room), so when a run's sandbox finds no room
the waiting ones are removed for it rather than the run failing beside them."""

import dataclasses
import uuid

import pytest

from runs.sandbox import diskquota
from runs.sandbox.base import SandboxError, SandboxSpec, tar_files
from runs.sandbox_config import get_backend, warm_template
from tests.runs.helpers import exists, filled

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def test_waiting_sandboxes_give_their_disk_to_a_run_that_finds_no_room(warm_settings):
    backend = get_backend()
    backend.spare_volumes = 0  # every volume below is made under check_room's eye
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
        # Nothing waits any more to give way: the next one is refused, as without a pool.
        with pytest.raises(SandboxError, match="too full to start a sandbox"):
            backend.launch(other_shape())
    finally:
        backend.remove(handle)
