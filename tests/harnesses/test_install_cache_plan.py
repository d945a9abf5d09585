"""A run planned to start from an install snapshot marks it used at once (the LRU order), so a
save's eviction between the plan and the launch takes the least recently used snapshot, not the
one this run is about to restore (it then failed as a platform error instead of installing)."""

import os
from types import SimpleNamespace

import pytest

from belvedir.sandbox_config import engine_name
from harnesses import install_cache
from harnesses.models import InstallSnapshot
from sandboxes.base import SandboxSpec
from sandboxes.installcache import Snapshot

pytestmark = pytest.mark.django_db


def test_a_planned_restore_marks_its_snapshot_used_before_the_launch(
    owner, harness, settings, tmp_path
):
    settings.BELVEDIR_INSTALL_CACHE_BYTES = 2**30
    settings.BELVEDIR_SANDBOX_DISK = "1g"
    image, meta = tmp_path / "k.img", tmp_path / "k.json"
    image.write_bytes(b"")
    meta.write_text("{}")
    os.utime(meta, (1, 1))  # last used in 1970: the first an eviction would take
    found = Snapshot(
        organization=owner.org.pk,
        key="a" * 64,
        image=image,
        bytes=0,
        run_id="run_x",
        made=1,
        used=1,
    )
    backend = SimpleNamespace(find_install=lambda spec: found)  # the one call plan makes
    InstallSnapshot.objects.create(
        organization=owner.org, harness=harness, host=engine_name(), key=found.key,
        run_id="run_x", size_bytes=0,
    )  # fmt: skip
    run = SimpleNamespace(
        harness_snapshot={"install_command": "pip install requests", "env": {}},
        harness_env_secrets_encrypted="",
        harness_id=harness.pk,
        project=SimpleNamespace(organization_id=owner.org.pk),
    )
    spec = SandboxSpec(run_id="run_y", image="belvedir-sandbox:latest", command=["true"])

    plan = install_cache.plan(run, "c0ffee", spec, backend, "stage-key", tmp_path)

    assert plan.reused
    assert meta.stat().st_mtime > 10**9
