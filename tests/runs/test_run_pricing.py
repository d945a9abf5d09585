"""Run pricing: free by default; a price set by the operator is charged at launch under the
organization's lock, refused past the balance (402) unless pay as you go is on, and refunded
when the sandbox never launched."""

import shutil
from pathlib import Path

import pytest
from django.db.models import Sum

from belvedir.errors import PaymentRequired
from billing import selectors
from billing import services as billing
from billing.models import Kind, LedgerEntry
from runs import services
from runs.executor import execute_run
from runs.models import Run
from tests.helpers.race import race

DOLLAR = 1_000_000


@pytest.fixture
def priced(settings):
    settings.BELVEDIR_RUN_PRICE_CPU_USD = 0.50
    settings.BELVEDIR_RUN_PRICE_GPU_USD = 5.00
    settings.BELVEDIR_RUNS_IN_FLIGHT_CAP = 100
    settings.BELVEDIR_RUNS_PER_DAY_CAP = 100
    return settings


def give(org, dollars: float) -> None:
    billing.ledger_operator_entry(
        organization=org, kind=Kind.CREDIT, amount_micros=int(dollars * DOLLAR), note="grant"
    )


def balance(org) -> int:
    return selectors.balance(organization=org)


@pytest.mark.docker
def test_runs_are_not_billed_by_default(owner, launch):
    run = launch()
    assert run.status == "queued"
    assert LedgerEntry.objects.count() == 0


@pytest.mark.docker
def test_a_priced_launch_is_charged_to_the_balance_with_the_run_as_reference(owner, launch, priced):
    give(owner.org, 2)
    run = launch()
    charge = LedgerEntry.objects.get(kind=Kind.CHARGE)
    assert (charge.reference, charge.amount_micros) == (run.pk, -500_000)
    assert charge.organization == owner.org
    assert balance(owner.org) == 1_500_000


@pytest.mark.docker
def test_a_launch_the_balance_cannot_pay_is_refused_with_402_naming_the_balance(
    owner, make_harness, priced
):
    give(owner.org, 0.20)
    harness = make_harness()
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 402, response.content
    body = response.json()
    assert body["code"] == "balance"
    assert "$0.50" in body["detail"] and "balance is $0.20" in body["detail"]
    assert Run.objects.count() == 0
    assert balance(owner.org) == 200_000


@pytest.mark.docker
def test_pay_as_you_go_launches_past_the_balance_within_the_monthly_limit(owner, launch, priced):
    billing.account_update(
        organization=owner.org, pay_as_you_go=True, monthly_limit_micros=DOLLAR, by=owner.user
    )
    launch()
    launch()
    assert balance(owner.org) == -DOLLAR
    with pytest.raises(PaymentRequired) as refused:
        launch()
    assert refused.value.code == "monthly_limit"
    assert "$1.00" in refused.value.message
    assert Run.objects.count() == 2


@pytest.mark.docker
def test_a_cancelled_queued_run_gets_its_price_back_once(owner, launch, priced):
    give(owner.org, 1)
    run = launch()
    assert balance(owner.org) == 500_000
    services.run_cancel(run=run)
    assert balance(owner.org) == DOLLAR
    assert billing.run_refund(organization_id=owner.org.pk, reference=run.pk) is None
    assert LedgerEntry.objects.filter(kind=Kind.REFUND).count() == 1


@pytest.mark.docker
def test_a_run_whose_sandbox_launched_keeps_its_charge_when_it_fails(owner, launch, priced):
    give(owner.org, 1)
    run = launch()
    Run.objects.filter(pk=run.pk).update(status="running", container_id="abc123")
    services.run_finish(run_id=run.pk, status="failed", notes=["belvedir: exited 1."])
    assert balance(owner.org) == 500_000
    assert not LedgerEntry.objects.filter(kind=Kind.REFUND).exists()


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_concurrent_launches_keep_the_ledger_consistent(owner, make_harness, priced):
    give(owner.org, 1.50)
    harness = make_harness()
    done, refused, crashed = race(
        6,
        lambda i: services.run_launch(
            project=owner.project, harness=harness, created_by=owner.user
        ),
    )
    assert crashed == []
    assert len(done) == 3 and refused == ["balance"] * 3
    total = LedgerEntry.objects.filter(organization=owner.org).aggregate(s=Sum("amount_micros"))
    assert balance(owner.org) == total["s"] == 0
    charged = set(LedgerEntry.objects.filter(kind=Kind.CHARGE).values_list("reference", flat=True))
    assert charged == {run.pk for run in done} == set(Run.objects.values_list("pk", flat=True))


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_launch_whose_clone_fails_is_charged_then_refunded(
    owner, make_harness, contract_repo, priced
):
    give(owner.org, 1)
    harness = make_harness()
    run = services.run_launch(project=owner.project, harness=harness, created_by=owner.user)
    assert balance(owner.org) == 500_000
    shutil.rmtree(Path(contract_repo.removeprefix("file://")))  # gone before the worker clones

    execute_run(run.pk)

    run.refresh_from_db()
    assert run.status == "failed"
    assert any("could not clone the repo" in note for note in run.notes), run.notes
    refund = LedgerEntry.objects.get(kind=Kind.REFUND)
    assert (refund.reference, refund.amount_micros) == (run.pk, 500_000)
    assert balance(owner.org) == DOLLAR


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_launch_whose_sandbox_image_is_missing_is_refunded(owner, make_harness, priced):
    give(owner.org, 1)
    priced.BELVEDIR_SANDBOX_IMAGE = "belvedir-no-such-image:never"
    run = services.run_launch(project=owner.project, harness=make_harness(), created_by=owner.user)

    execute_run(run.pk)

    run.refresh_from_db()
    assert run.status == "failed"
    assert any("sandbox" in note for note in run.notes), run.notes
    assert balance(owner.org) == DOLLAR


@pytest.mark.docker
def test_the_launch_page_shows_the_refusal_with_the_balance_and_402(owner, make_harness, priced):
    harness = make_harness(name="priced")
    response = owner.web.post(
        f"/runs/launch/{harness.pk}/", {"attempts": 1, "grading": "pass@1"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 402
    page = response.content.decode()
    assert "costs $0.50" in page and "balance is $0.00" in page
    assert Run.objects.count() == 0


@pytest.mark.docker
def test_a_gpu_run_is_charged_the_gpu_price(owner, launch, priced, gpu_settings):
    give(owner.org, 6)
    run = launch(harness={"compute": "gpu"})
    assert LedgerEntry.objects.get(kind=Kind.CHARGE, reference=run.pk).amount_micros == -5 * DOLLAR
    assert balance(owner.org) == DOLLAR
