"""The warm pool (sandboxes/warm.py): sandboxes started ahead under gVisor, each taken by one
run, which runs in it as in a cold sandbox (score, logs, cancel, time cap), its secrets never in
the container's config; other shapes and a pool of 0 start cold; the sweep removes only its own
engine's stale members.

The rest of the suite runs with BELVEDIR_SANDBOX_WARM=0 (tests/conftest.py); these tests turn
it on with an instance of their own, so their pool is theirs alone on a shared engine.
"""

import dataclasses
import json
import os
import threading
import time
import uuid

import docker
import pytest

from belvedir.sandbox_config import get_backend, warm_template
from runs.contract import run_model_secrets
from runs.executor import execute_run
from sandboxes import warm, warmclaims
from sandboxes.base import SandboxHandle, tar_files
from tests.runs.helpers import (
    Background,
    exists,
    filled,
    filling_done,
    wait_running_and_ticking,
)

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def test_a_run_takes_the_warm_sandbox_and_succeeds_with_its_score_and_logs(warm_settings, launch):
    backend = get_backend()
    member = filled(backend)
    assert backend.list_by_label() == [] or member.id not in {i.id for i in backend.list_by_label()}

    run = launch()
    assert execute_run(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.container_id == member.id
    assert run.score == pytest.approx(0.85)
    assert run.log_tail.count("starting in") == 1
    # Used once, then removed with its run; the pool is filled with another one.
    assert not exists(member.id)
    assert filled(backend).id != member.id


def test_a_warm_run_keeps_its_secrets_out_of_inspect_and_can_be_cancelled(
    warm_settings, launch, owner
):
    backend = get_backend()
    member = filled(backend)
    run = launch(env={"SLEEP": "60"})
    worker = Background(run.pk)
    wait_running_and_ticking(run.pk)
    run.refresh_from_db()
    assert run.container_id == member.id
    assert [i.id for i in backend.list_by_label({"belvedir.run_id": run.pk})] == [member.id]
    client = docker.from_env()
    inspected = json.dumps(client.api.inspect_container(member.id))
    client.close()
    run_key = run_model_secrets(run)["run_key"]
    assert (
        len(run_key) > 8
        and run_key not in inspected
        and run.pk not in inspected.split("Env")[1][:2000]
    )

    response = owner.api.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 200
    assert worker.join(timeout=20) == "cancelled"
    assert not exists(member.id)


def test_the_time_cap_stops_a_warm_run(warm_settings, launch):
    warm_settings.BELVEDIR_RUN_TIMEOUT = 3
    member = filled(get_backend())
    run = launch(env={"SLEEP": "60"})
    assert execute_run(run.pk) == "failed"
    run.refresh_from_db()
    assert run.container_id == member.id
    assert "took longer than its 3 s limit" in " ".join(run.notes)
    assert not exists(member.id)


def test_two_claims_at_once_never_get_the_same_warm_sandbox(warm_settings):
    pool = get_backend().pool
    member = filled(get_backend())
    got, start = [], threading.Barrier(4)

    def taker(n: int) -> None:
        start.wait()
        got.append(pool.take(f"run_claim{n}"))

    threads = [threading.Thread(target=taker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [m.id for m in got if m is not None] == [member.id]
    assert pool.take("run_late") is None  # taken: the next run starts cold


def test_no_pool_and_other_shapes_start_cold(warm_settings, launch):
    backend = get_backend()
    member = filled(backend)
    template = warm_template()
    assert backend.pool.fits(dataclasses.replace(template, run_id="r", workspace=b"x"))
    for other in ({"memory": "512m"}, {"image": "other:1"}, {"runtime": "runc"}, {"cpus": 0.5}):
        spec = dataclasses.replace(template, run_id="r", workspace=b"x", **other)
        assert not backend.pool.fits(spec)
    # A launch of another shape leaves the warm sandbox waiting.
    spec = dataclasses.replace(
        template,
        run_id=f"run_cold{uuid.uuid4().hex[:6]}",
        memory="512m",
        command=["/bin/true"],
        workspace=tar_files({"a.txt": b"a"}),
    )
    handle = backend.launch(spec)
    try:
        assert handle.id != member.id
    finally:
        backend.remove(handle)
    assert backend.pool.claimed_by(member.id) is None and exists(member.id)

    warm_settings.BELVEDIR_SANDBOX_WARM = 0
    cold = get_backend()
    assert cold.pool.fill() == []
    run = launch()
    assert execute_run(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.container_id != member.id and exists(member.id)


def test_the_sweep_removes_its_own_engines_stale_members_only(warm_settings):
    backend = get_backend()
    stale = filled(backend)
    other = type(backend)(
        instance=backend.instance,
        data_dir=backend.data_dir,
        warm_size=1,
        warm_template=warm_template(),
        warm_engine="another-host unix:///var/run/docker.sock",
    )
    theirs = filled(other)
    assert theirs.key != stale.key

    # Older than the limit: stale.
    old = dataclasses.replace(stale, created=time.time() - backend.pool.max_age - 1)
    (backend.pool.dir / f"{stale.id}.ready").write_text(json.dumps(dataclasses.asdict(old)))
    removed = backend.sweep_warm()
    assert removed == [stale.id] and not exists(stale.id)
    assert exists(theirs.id) and other.pool.claimed_by(theirs.id) is None
    fresh = filled(backend)  # the sweep filled the pool again
    assert fresh.id not in (stale.id, theirs.id)
    assert backend.sweep_warm() == []  # a fresh member is left alone
    assert other.pool.drain() == [theirs.id]  # a host out of service: its waiting ones go
    assert not exists(theirs.id)
    backend.remove(SandboxHandle(fresh.id, ""))  # removed like any sandbox: the record too
    assert fresh.id not in {m.id for m in backend.pool.members()}


def test_the_reaper_removes_a_taken_warm_sandbox_whose_run_is_over(warm_settings, make_run):
    from runs import reaper

    backend = get_backend()
    member = filled(backend)
    run = make_run(status="failed")  # its worker died after the take; the run was failed
    assert backend.pool.take(run.pk) == member
    assert [i.id for i in backend.list_by_label({"belvedir.run_id": run.pk})] == [member.id]

    assert reaper.reap()["removed"] == 1
    assert not exists(member.id) and backend.pool.claimed_by(member.id) is None


def test_a_warm_sandbox_is_hardened_exactly_as_a_cold_one(warm_settings):
    """Every limit the engine applies (user, capabilities, seccomp/no-new-privileges, read-only
    root, pids, memory, swap, CPUs, network, runtime, init, mounts' targets and modes) is the
    same for a pool member and a cold sandbox of the same shape."""
    member = filled(get_backend())
    warm_settings.BELVEDIR_SANDBOX_WARM = 0
    cold_backend = get_backend()
    spec = dataclasses.replace(
        warm_template(),
        run_id=f"run_cmp{uuid.uuid4().hex[:6]}",
        workspace=tar_files({"a.txt": b"a"}),
    )
    handle = cold_backend.launch(spec)
    client = docker.from_env()
    try:
        warm_seen = client.api.inspect_container(member.id)
        cold_seen = client.api.inspect_container(handle.id)
    finally:
        client.close()
        cold_backend.remove(handle)

    def hardening(seen: dict) -> dict:
        host = dict(seen["HostConfig"])
        binds = sorted(bind.split(":", 1)[1] for bind in host.pop("Binds") or [])
        config = {k: seen["Config"][k] for k in ("User", "WorkingDir", "Image")}
        return {**host, "Binds": binds, **config}

    warm_config, cold_config = hardening(warm_seen), hardening(cold_seen)
    assert warm_config == cold_config
    assert warm_config["CapDrop"] == ["ALL"] and warm_config["ReadonlyRootfs"] is True
    assert warm_config["SecurityOpt"] == ["no-new-privileges"] and warm_config["User"]


def test_a_claim_cut_short_never_strands_a_warm_sandbox(warm_settings, monkeypatch):
    """A worker killed as it claims leaves no claim, or (an older process's) an empty one:
    the sweep removes that member once the claim is old, instead of skipping it forever."""

    backend = get_backend()
    member = filled(backend)

    def killed(*args):
        raise KeyboardInterrupt  # the worker dies between writing its claim and linking it

    with monkeypatch.context() as patched:
        patched.setattr(warm.os, "link", killed)
        with pytest.raises(KeyboardInterrupt):
            backend.pool.claim(member.id, "run_killed")
    assert backend.pool.claimed_by(member.id) is None
    assert [p.name for p in backend.pool.dir.glob(f"{member.id}.*")] == [f"{member.id}.ready"]

    claim = backend.pool.dir / f"{member.id}.claim"
    claim.write_text("")  # an empty claim, just made: a claim may still be under way
    assert backend.sweep_warm() == [] and exists(member.id)
    old = time.time() - warmclaims.CLAIM_GRACE - 1
    os.utime(claim, (old, old))
    assert member.id in backend.sweep_warm() and not exists(member.id)
    assert not list(backend.pool.dir.glob(f"{member.id}.*"))


def test_a_stale_member_that_cannot_be_removed_leaves_the_run_to_start_cold(
    warm_settings, monkeypatch
):
    """`take` meets a member of an image rebuilt since and its removal fails (the engine
    hiccups): the run gets None (a cold start), not the error; the sweep removes it later."""
    from sandboxes.base import SandboxError

    backend = get_backend()
    member = filled(backend)
    rebuilt = dataclasses.replace(member, image_id="sha256:" + "0" * 64)
    (backend.pool.dir / f"{member.id}.ready").write_text(json.dumps(dataclasses.asdict(rebuilt)))

    def failing(container_id):
        raise SandboxError("could not remove the sandbox: engine busy")

    with monkeypatch.context() as patched:
        patched.setattr(backend.pool, "_discard", failing)
        assert backend.pool.take("run_stale") is None
    assert exists(member.id) and backend.pool.claimed_by(member.id) is None
    backend.pool.remove(member.id)


def waiting_members(backend) -> list[warm.Member]:
    pool = backend.pool
    return [m for m in pool.members() if m.key == pool.key and pool.claimed_by(m.id) is None]


def test_the_pool_waits_ready_again_while_the_run_that_took_its_member_still_runs(
    warm_settings, launch, owner
):
    """Refilled when a run takes its member, not when that run's sandbox is removed: a launch
    right after the last one finds a member waiting."""
    backend = get_backend()
    member = filled(backend)
    run = launch(env={"SLEEP": "60"})
    worker = Background(run.pk)
    wait_running_and_ticking(run.pk)
    filling_done()  # only the fill the take started: nobody calls fill() here
    [successor] = waiting_members(backend)
    run.refresh_from_db()
    assert run.status == "running" and run.container_id == member.id != successor.id
    assert backend.pool.claimed_by(member.id) == run.pk and exists(successor.id)

    assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
    assert worker.join(timeout=20) == "cancelled"
    filling_done()
    assert [m.id for m in waiting_members(backend)] == [successor.id]  # still size 1


def test_a_taken_members_successor_is_made_once_the_run_ends_or_a_few_seconds_in(
    warm_settings, launch, owner, monkeypatch
):
    """Not beside the run's first moments: a short run keeps the CPU to itself; a run that
    goes on has its successor FILL_AFTER_TAKE_SECONDS in (the test above, 2 s)."""
    monkeypatch.setattr(warm, "FILL_AFTER_TAKE_SECONDS", 30)
    backend = get_backend()
    member = filled(backend)
    run = launch(env={"SLEEP": "60"})
    worker = Background(run.pk)
    wait_running_and_ticking(run.pk)
    time.sleep(1)
    assert waiting_members(backend) == [] and not backend.pool.filling()

    started = time.monotonic()
    assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
    assert worker.join(timeout=20) == "cancelled"
    filling_done()
    assert time.monotonic() - started < 25  # the sandbox's exit, not the 30 s, started it
    [successor] = waiting_members(backend)
    assert successor.id != member.id and not exists(member.id)


def test_a_launch_while_a_member_is_being_made_waits_for_it_instead_of_starting_cold(
    warm_settings, monkeypatch
):
    backend = get_backend()
    monkeypatch.setattr(warm, "FILL_WAIT_SECONDS", 30)  # how long the fill takes is not the point
    assert waiting_members(backend) == [] and not backend.pool.filling()
    backend.pool.fill_later()
    deadline = time.monotonic() + 10
    while not backend.pool.filling():
        assert time.monotonic() < deadline, "the fill never said it was making a member"
        time.sleep(0.005)
    assert waiting_members(backend) == []  # not ready yet

    spec = dataclasses.replace(
        warm_template(),
        run_id=f"run_wait{uuid.uuid4().hex[:6]}",
        workspace=tar_files({"a.txt": b"a"}),
    )
    handle = backend.launch(spec)
    try:
        assert backend.pool.claimed_by(handle.id) == spec.run_id  # the member made meanwhile
        assert handle.id in {m.id for m in backend.pool.members()}
    finally:
        backend.remove(handle)


def test_a_filler_that_died_making_a_member_holds_no_launch(warm_settings):
    """Its note that a member is on its way names a process that is gone: `take` does not
    wait for it (nor for a note older than a member takes to make)."""
    import subprocess

    pool = get_backend().pool
    gone = subprocess.Popen(["true"])
    gone.wait()
    pool.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    note = pool.dir / f".making-{pool.key}"
    note.write_text(json.dumps({"pid": gone.pid, "started": time.time()}))
    assert not pool.filling()
    started = time.monotonic()
    assert pool.take("run_nowait", wait=30) is None
    assert time.monotonic() - started < 1
    old = time.time() - warm.MAKING_GRACE_SECONDS - 1
    note.write_text(json.dumps({"pid": os.getpid(), "started": old}))
    assert not pool.filling()
    note.write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
    assert pool.filling()  # a live filler's note: launches wait for its member
    note.unlink()


def test_a_member_taken_while_the_fill_thread_makes_another_gets_its_successor_from_it(
    warm_settings, monkeypatch
):
    """Pool of 2: a launch takes the first member while this process's fill thread makes the
    second; its request for a successor is served by that thread once its fill is done, not
    dropped (which left the pool a member short until the next removal or sweep)."""
    warm_settings.BELVEDIR_SANDBOX_WARM = 2
    backend = get_backend()
    pool, make = backend.pool, backend.pool._make
    making_second, taken = threading.Event(), threading.Event()
    made = []

    def make_the_second_once_the_first_is_taken(spec):
        made.append(spec)
        if len(made) == 2:
            making_second.set()
            assert taken.wait(60)
        return make(spec)

    monkeypatch.setattr(pool, "_make", make_the_second_once_the_first_is_taken)
    pool.fill_later()
    assert making_second.wait(60)
    [first] = waiting_members(backend)
    member = pool.take("run_meanwhile")
    assert member is not None and member.id == first.id
    pool.fill_later()  # what a launch asks once it has its member
    taken.set()
    filling_done()
    assert len(made) == 3 and len(waiting_members(backend)) == 2
    pool.remove(member.id)


def test_a_fill_leaves_no_lock_file_and_still_keeps_other_fillers_out(warm_settings):
    pool = get_backend().pool
    with pool._fill_lock() as locked:
        assert locked
        assert pool.fill() == []  # another filler holds this pool: it returns at once
    assert len(pool.fill()) == 1
    assert not (pool.dir / f".lock-{pool.key}").exists()


def test_a_fill_asked_while_another_process_fills_is_done_once_that_fill_ends(warm_settings):
    """That fill may have counted before the member this one replaces was taken (and it stops
    after `size` members): the fill thread waits for it rather than give up."""
    backend = get_backend()
    pool = backend.pool
    with pool._fill_lock() as locked:  # another process's fill, as flock sees it
        assert locked
        pool.fill_later()
        time.sleep(0.5)
        assert waiting_members(backend) == []
    filling_done()
    assert len(waiting_members(backend)) == 1
