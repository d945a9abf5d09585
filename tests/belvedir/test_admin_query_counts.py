"""Every admin changelist takes as many queries with many rows as with a few: an operator's
list that read a related row per line (an N+1) would grow with the rows. The rows: the
query-count seed (runs, sessions, spans, tasks, groups, ledger, keys) in one organization,
then again in a second with 30 runs, plus in each fine-tuned models, environments with
versions, invitations, audit events, GPU devices held by runs, task sandboxes, coupon
redemptions and a Hugging Face token."""

import itertools

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from belvedir import audit
from belvedir.members import invitation_create
from belvedir.models import Role
from billing.models import Coupon
from billing.services import coupon_redeem
from harbor.models import TaskSandbox
from harnesses import environments
from models_registry.services import hf_token_set
from runs.models import GpuDevice, WorkerHost
from tests.helpers.seed import seed

pytestmark = pytest.mark.django_db

_NUMBERS = itertools.count()


def _rows(tenant, make_fine_tuned, *, runs: int) -> None:
    seeded = seed(tenant, runs=runs, big_session_spans=8)
    for run in seeded.runs:
        n = next(_NUMBERS)
        make_fine_tuned(name=f"lora-{n}", project=tenant.project)
        TaskSandbox.objects.create(run=run, name=f"task-{n}")
        GpuDevice.objects.create(host=f"gpu-{n}", gpu_type="a100", device_id="0", run=run)
        WorkerHost.objects.create(name=f"host-{n}", engine=f"unix:///run/docker-{n}.sock")
        invitation_create(
            organization=tenant.org,
            email=f"i{n}@example.com",
            role=Role.MEMBER,
            invited_by=tenant.user,
        )
        audit.audit_record(
            action=audit.RUN_LAUNCH, organization=tenant.org, target=run.pk, actor=tenant.user
        )
        environment = environments.environment_create(
            project=tenant.project, name=f"Env {n}", tasks="What is 2+2?\n", created_by=tenant.user
        )
        environments.environment_update(
            environment=environment, tasks="What is 3+2?\n", updated_by=tenant.user
        )
        Coupon.objects.create(code=f"GIFT{n}", amount_micros=1_000_000)
        coupon_redeem(organization=tenant.org, code=f"GIFT{n}", created_by=tenant.user)
    hf_token_set(organization=tenant.org, token="hf_" + "x" * 30, updated_by=tenant.user)


def _changelist_queries(web) -> dict[str, int]:
    counts = {}
    for model in admin.site._registry:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        with CaptureQueriesContext(connection) as captured:
            response = web.get(url)
        assert response.status_code == 200, url
        counts[url] = len(captured.captured_queries)
    return counts


def test_every_admin_changelist_takes_as_many_queries_with_many_rows_as_with_a_few(
    superuser, owner, outsider, make_fine_tuned
):
    _rows(owner, make_fine_tuned, runs=3)
    few = _changelist_queries(superuser)
    _rows(outsider, make_fine_tuned, runs=30)
    many = _changelist_queries(superuser)
    grown = {url: f"{few[url]} -> {many[url]}" for url in few if many[url] != few[url]}
    assert grown == {}, f"queries grew with the rows (an N+1): {grown}"
