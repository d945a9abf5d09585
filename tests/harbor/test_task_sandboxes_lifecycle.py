"""Task sandboxes never outlive their run and never pass HARBOR_CONCURRENCY (sampled from
Docker itself); their minutes are charged once; an organization out of credits gets no more."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone

from billing.models import Kind, LedgerEntry
from billing.selectors import balance
from billing.services import account_update, ledger_operator_entry
from harbor.models import TaskSandbox
from harbor.services import task_sandbox_settle
from runs.models import Run, Status
from runs.reaper import reap
from runs.services import run_finish
from tests.helpers.task_sandboxes import (
    Client,
    context_tar,
    fresh_dockerfile,
    make_managed_run,
    managed_client,
    task_containers,
)
from tests.runs.helpers import wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("task_sandboxes_removed"),
]


@pytest.fixture
def context(task_images):
    """One task environment for the whole test; its image removed afterwards."""
    return context_tar(fresh_dockerfile()), task_images


def start(client: Client, context, name: str) -> dict:
    data, tags = context
    answer = client.create(name, data)
    assert answer.status == 201, answer.body
    tags.add(answer.json()["image"])
    return answer.json()


class Sampler:
    """Counts the run's running task containers from Docker, every 50 ms, in a thread."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            running = [c for c in task_containers(self.run_id) if c.status == "running"]
            self.most = max(self.most, len(running))
            self.samples += 1
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def test_harbor_concurrency_2_never_has_more_than_2_task_sandboxes_alive(
    owner, sandbox_settings, context
):
    run, client = managed_client(
        owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, env={"HARBOR_CONCURRENCY": "2"}
    )
    start(client, context, "warm-up")  # the image, built once
    client.stop(TaskSandbox.objects.get(run=run).pk)
    refusals = []

    def trial(index: int) -> int:
        """What Harbor's trial does: start, run the agent and the verifier, stop; a 429 is
        retried after its Retry-After."""
        try:
            while True:
                answer = client.create(f"task-{index}", context[0])
                if answer.status == 429:
                    refusals.append(answer)
                    time.sleep(float(answer.headers["Retry-After"]) / 4)
                    continue
                assert answer.status == 201, answer.body
                sandbox = answer.json()["id"]
                lines = client.exec_lines(sandbox, "sleep 1; echo done", timeout_sec=30)
                assert lines[-1]["exit_code"] == 0
                client.stop(sandbox)
                return index
        finally:
            close_old_connections()

    with Sampler(run.pk) as sampler, ThreadPoolExecutor(4) as pool:
        finished = sorted(pool.map(trial, range(6)))  # 4 at once against a limit of 2

    assert finished == list(range(6))
    assert sampler.samples > 10 and sampler.most == 2
    assert refusals and refusals[0].json()["code"] == "concurrency"
    assert "HARBOR_CONCURRENCY is 2" in refusals[0].json()["detail"]
    assert TaskSandbox.objects.filter(run=run, status="stopped").count() == 7
    assert task_containers(run.pk) == []


def test_cancelling_a_run_removes_every_task_sandbox_within_seconds(
    owner, sandbox_settings, context
):
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    made = [start(client, context, f"task-{i}")["id"] for i in range(3)]
    assert len(task_containers(run.pk)) == 3

    assert owner.api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200

    wait_for(lambda: task_containers(run.pk) == [], 10, "the task sandboxes to be removed")
    assert set(TaskSandbox.objects.filter(run=run).values_list("status", flat=True)) == {"stopped"}
    assert set(TaskSandbox.objects.filter(run=run).values_list("pk", flat=True)) == set(made)
    assert client.create("late", context[0]).status == 401  # the run key died with the run


def test_a_killed_workers_task_sandboxes_are_reaped(owner, sandbox_settings, context):
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    for i in range(2):
        start(client, context, f"task-{i}")
    # The worker was killed: its heartbeats stopped.
    stale = timezone.now() - timedelta(seconds=sandbox_settings.BELVEDIR_HEARTBEAT_STALE + 60)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)

    reap()

    run.refresh_from_db()
    assert run.status == Status.FAILED and "stopped responding" in run.notes[-1]
    assert task_containers(run.pk) == []
    assert not TaskSandbox.objects.filter(run=run, status__in=TaskSandbox.ALIVE).exists()


def test_task_sandbox_rows_left_alive_by_a_lost_process_are_reaped(
    owner, sandbox_settings, context
):
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    start(client, context, "task")
    Run.objects.filter(pk=run.pk).update(status=Status.FAILED)  # ended behind our back

    reap()

    assert task_containers(run.pk) == []
    assert TaskSandbox.objects.get(run=run).status == "stopped"


def test_a_finished_run_leaves_no_task_sandbox_behind(owner, sandbox_settings, context):
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL)
    start(client, context, "task")

    assert run_finish(run_id=run.pk, status=Status.SUCCEEDED, score=1.0)

    assert task_containers(run.pk) == []
    assert TaskSandbox.objects.get(run=run).status == "stopped"


def test_task_sandbox_minutes_are_charged_once_and_credits_running_out_end_the_run(
    owner, sandbox_settings, context
):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.25
    run, client = managed_client(
        owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, credits_usd=0.25
    )
    first = start(client, context, "task-1")

    stopped = client.stop(first["id"]).json()

    assert stopped["charged_micros"] == 250_000  # one started minute at $0.25
    charge = LedgerEntry.objects.get(organization=owner.org, reference=first["id"])
    assert charge.kind == Kind.CHARGE and charge.amount_micros == -250_000
    assert task_sandbox_settle(sandbox_id=first["id"]) == 0  # settled once
    assert client.stop(first["id"]).json()["charged_micros"] == 250_000
    assert LedgerEntry.objects.filter(reference=first["id"]).count() == 1
    assert balance(organization=owner.org) == 0

    refused = client.create("task-2", context[0])

    assert refused.status == 402 and refused.json()["code"] == "balance"
    assert "$0.00" in refused.json()["detail"]
    run.refresh_from_db()
    assert run.status == Status.FAILED
    assert run.notes[-1].startswith("belvedir: the organization ran out of credits")
    assert task_containers(run.pk) == []


def test_pay_as_you_go_keeps_task_sandboxes_coming_past_a_zero_balance(
    owner, sandbox_settings, context
):
    run, key = make_managed_run(owner, credits_usd=0)
    ledger_operator_entry(
        organization=owner.org, kind=Kind.ADJUSTMENT, amount_micros=-1, note="below zero"
    )
    client = Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, key)
    assert client.create("t", context[0]).status == 402
    _, key2 = make_managed_run(owner, credits_usd=0)
    account_update(organization=owner.org, pay_as_you_go=True)

    created = Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, key2).create("t", context[0])

    assert created.status == 201, created.body
    context[1].add(created.json()["image"])


def test_the_time_of_running_task_sandboxes_counts_before_it_is_charged(
    owner, sandbox_settings, context
):
    """Each task sandbox is charged when it stops; until then its minutes still count, so a
    run cannot keep starting new ones on credits its running ones have already used."""
    sandbox_settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.25
    run, client = managed_client(owner, sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, credits_usd=0.5)
    first = start(client, context, "task-1")
    TaskSandbox.objects.filter(pk=first["id"]).update(
        started_at=timezone.now() - timedelta(seconds=150)  # 3 started minutes: $0.75
    )

    refused = client.create("task-2", context[0])

    assert refused.status == 402 and refused.json()["code"] == "balance"
    assert "-$0.25" in refused.json()["detail"]
    run.refresh_from_db()
    assert run.status == Status.FAILED and "ran out of credits" in run.notes[-1]
    assert task_containers(run.pk) == []
    assert TaskSandbox.objects.get(pk=first["id"]).charged_micros == 750_000
    assert balance(organization=owner.org) == -250_000


def test_a_task_sandbox_stopped_by_a_process_that_died_before_charging_it_is_charged_by_the_reaper(
    owner, sandbox_settings
):
    sandbox_settings.BELVEDIR_TASK_SANDBOX_PRICE_PER_MINUTE_USD = 0.25
    run, _ = make_managed_run(owner)
    now = timezone.now()
    lost = TaskSandbox.objects.create(
        run=run,
        name="stopped-unpaid",
        status=TaskSandbox.Status.STOPPED,
        started_at=now - timedelta(minutes=10),
        stopped_at=now - timedelta(minutes=8),  # two minutes used, never charged
    )

    reap()
    reap()  # and only once

    lost.refresh_from_db()
    assert lost.charged and lost.charged_micros == 500_000
    assert LedgerEntry.objects.filter(reference=lost.pk).count() == 1


def test_concurrent_creates_of_one_environment_build_its_image_once(
    owner, sandbox_settings, context
):
    """Harbor starts HARBOR_CONCURRENCY trials at once, and an exported environment's tasks
    share their Dockerfile: one builds, the others wait for it and find it cached."""
    run, key = make_managed_run(owner)
    client = Client(sandbox_settings.BELVEDIR_SANDBOX_BASE_URL, key)

    def create(index: int) -> dict:
        try:
            answer = client.create(f"task-{index}", context[0])
            assert answer.status == 201, answer.body
            return answer.json()
        finally:
            close_old_connections()

    with ThreadPoolExecutor(3) as pool:
        made = list(pool.map(create, range(3)))
    context[1].add(made[0]["image"])

    assert sorted(m["cached"] for m in made) == [False, True, True]
