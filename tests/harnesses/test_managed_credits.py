"""The managed Harbor workspace's credits rule at save: a managed Harbor harness (a Harbor card,
Modal tokens blank) is saved only for an organization that holds credits or has pay as you go
on, through every path that saves one (page form, API, CLI, admin, harness from environment),
the refusal naming the condition; and checked again at launch (tests/harnesses/
test_managed_rules.py)."""

import json

import pytest

from belvedir.errors import Invalid
from billing.models import Kind
from billing.services import account_update, ledger_operator_entry
from harnesses import environments, services
from harnesses.admin import HarnessAdminForm
from harnesses.forms import HarnessForm
from harnesses.models import Harness
from tests.helpers.harbor import FOUR_KINDS
from tests.helpers.tenants import pay_as_you_go

MODAL = {"MODAL_TOKEN_ID": "ak-123", "MODAL_TOKEN_SECRET": "as-456"}
CONDITION = "the organization has no credits (its balance is $0.00) and pay as you go is off"
HX = {"HTTP_HX_REQUEST": "true"}


def credit(org, dollars: float, kind=Kind.CREDIT) -> None:
    ledger_operator_entry(
        organization=org, kind=kind, amount_micros=int(dollars * 1_000_000), note="test"
    )


def spend_everything(org) -> None:
    """The balance back to $0.00, as metered usage would leave it."""
    credit(org, -1, kind=Kind.ADJUSTMENT)


def create(tenant, **fields):
    body = {"preset": "harbor-runner", "name": "Managed", **fields}
    return tenant.api.post("/api/v1/harnesses", body, format="json")


def assert_refused_naming_the_condition(message: str) -> None:
    assert CONDITION in message
    assert "Organization Settings → Billing" in message and "MODAL_TOKEN_ID" in message


# --- the API ------------------------------------------------------------------------------


def test_the_api_refuses_a_managed_harness_without_credits_or_pay_as_you_go(owner):
    response = create(owner)

    assert response.status_code == 400
    assert response.json()["code"] == "managed_credits"
    assert_refused_naming_the_condition(response.json()["detail"])
    assert not Harness.objects.filter(name="Managed").exists()


def test_pay_as_you_go_lets_the_api_save_it(owner):
    pay_as_you_go(owner.org)

    assert create(owner).status_code == 201


def test_credits_let_the_api_save_it(owner):
    credit(owner.org, 0.01)

    assert create(owner).status_code == 201


def test_both_modal_tokens_lift_the_credits_rule(owner):
    response = create(owner, env={"HARBOR_AGENT": "belvedir", **MODAL})

    assert response.status_code == 201, response.json()


def test_pay_as_you_go_at_its_monthly_limit_is_refused_naming_the_limit(owner):
    account_update(organization=owner.org, pay_as_you_go=True, monthly_limit_micros=0)

    response = create(owner)

    assert response.status_code == 400
    assert "pay as you go has reached its monthly limit of $0.00" in response.json()["detail"]


def test_an_update_after_the_credits_ran_out_is_refused_unless_it_leaves_the_workspace(owner):
    credit(owner.org, 1)
    harness = create(owner).json()
    spend_everything(owner.org)
    url = f"/api/v1/harnesses/{harness['id']}"

    renamed = owner.api.patch(url, {"name": "Renamed"}, format="json")
    own_modal = owner.api.patch(url, {"env": {"HARBOR_AGENT": "belvedir", **MODAL}}, format="json")

    assert renamed.status_code == 400
    assert_refused_naming_the_condition(renamed.json()["detail"])
    assert own_modal.status_code == 200, own_modal.json()
    assert Harness.objects.get(pk=harness["id"]).name == "Managed"


def test_other_harnesses_need_no_credits(owner):
    response = create(owner, preset="runner", name="One sandbox")

    assert response.status_code == 201, response.json()


# --- the page form, the catalog card's prefilled form ----------------------------------------


def card_form(**change) -> dict:
    values = HarnessForm.initial_from(services.harness_defaults_from_preset("harbor-runner"))
    return {**values, "name": "Managed", **change}


def test_the_new_harness_form_from_the_card_shows_the_refusal_above_the_fields(owner):
    response = owner.web.post("/harnesses/new/", card_form(), **HX)

    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="errorlist nonfield"' in html
    assert CONDITION in html
    assert not Harness.objects.filter(name="Managed").exists()


def test_the_new_harness_form_saves_it_with_pay_as_you_go_on(owner):
    pay_as_you_go(owner.org)

    response = owner.web.post("/harnesses/new/", card_form())

    assert response.status_code == 303
    assert Harness.objects.filter(name="Managed", preset="harbor-runner").exists()


def test_the_edit_form_refuses_a_save_once_the_credits_ran_out(owner):
    credit(owner.org, 1)
    harness = Harness.objects.get(pk=create(owner).json()["id"])
    spend_everything(owner.org)

    response = owner.web.post(f"/harnesses/{harness.pk}/", card_form(name="Renamed"), **HX)

    assert response.status_code == 400
    assert CONDITION in response.content.decode()
    harness.refresh_from_db()
    assert harness.name == "Managed"


# --- the CLI ------------------------------------------------------------------------------


def test_the_cli_refuses_it_naming_the_condition_then_saves_it_with_credits(cli, owner):
    code, _, err = cli("benchmarks", "add", "--preset", "harbor-runner")

    assert code == 1
    assert CONDITION in err and "managed_credits" in err

    credit(owner.org, 5)
    code, out, err = cli("benchmarks", "add", "--preset", "harbor-runner")

    assert code == 0, err
    assert Harness.objects.get(project=owner.project).preset == "harbor-runner"


# --- the admin, a harness from an environment ------------------------------------------------


def admin_form(owner, **change) -> dict:
    values = services.harness_defaults_from_preset("harbor-runner")
    data = {**values, "env": '{"HARBOR_AGENT": "belvedir"}', "project": owner.project.pk}
    return {**data, "name": "Admin made", "created_by": "", **change}


def test_the_admin_form_refuses_it_for_the_harness_projects_organization(owner):
    form = HarnessAdminForm(data=admin_form(owner))

    assert not form.is_valid()
    assert_refused_naming_the_condition(" ".join(form.errors["__all__"]))

    pay_as_you_go(owner.org)
    assert HarnessAdminForm(data=admin_form(owner)).is_valid()


def test_a_harbor_harness_from_an_environment_needs_credits_too(owner):
    environment = environments.environment_create(
        project=owner.project, name="Four kinds", tasks=FOUR_KINDS, created_by=owner.user
    )

    with pytest.raises(Invalid, match="pay as you go is off") as refused:
        environments.environment_harness_create(environment=environment, preset="harbor-runner")
    assert refused.value.code == "managed_credits"

    credit(owner.org, 1)
    harness = environments.environment_harness_create(
        environment=environment, preset="harbor-runner"
    )
    assert [t["id"] for t in json.loads(harness.tasks)] == [t["id"] for t in FOUR_KINDS]
    assert "HARBOR_DATASET" not in harness.env
