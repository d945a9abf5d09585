"""The managed Harbor workspace's rules: every refused variable and condition, when a harness is
saved (API, create and update) and at launch, and the Modal-token switch that lifts them all.
The credits condition at save, through every path that saves: test_managed_credits.py."""

import pytest

from belvedir.errors import Invalid
from billing.models import Kind
from billing.services import account_update, ledger_operator_entry
from harnesses import catalog, drivers, managed
from harnesses.models import Harness

MODAL = {"MODAL_TOKEN_ID": "ak-123", "MODAL_TOKEN_SECRET": "as-456"}
CARD_ENV = {"HARBOR_AGENT": "belvedir", "HARBOR_N_TASKS": "5", "JUDGE_MODEL": "m"}

# (what the user changes on the Harbor card, the field refused, words the message must hold)
REFUSALS = [
    ({"repo_url": "https://github.com/me/harness-harbor"}, "repo_url", "Harbor driver"),
    ({"install_command": "pip install harbor"}, "install_command", "install_command"),
    ({"run_command": "python3 -m belvedir_harbor.run --debug"}, "run_command", "run_command"),
    ({"env": {**CARD_ENV, "EXTRA_FLAG": "1"}}, "env", "EXTRA_FLAG"),
    (
        {"env": {**CARD_ENV, "HARBOR_AGENT": "belvedir_harbor.agent:BelvedirAgent"}},
        "env",
        "HARBOR_AGENT",
    ),
    ({"env": {**CARD_ENV, "HARBOR_AGENT": "My Agent"}}, "env", "HARBOR_AGENT"),
    ({"env": {**CARD_ENV, "HARBOR_CONCURRENCY": "5"}}, "env", "HARBOR_CONCURRENCY"),
    ({"env": {**CARD_ENV, "HARBOR_CONCURRENCY": "0"}}, "env", "HARBOR_CONCURRENCY"),
    ({"env": {**CARD_ENV, "HARBOR_CONCURRENCY": "two"}}, "env", "HARBOR_CONCURRENCY"),
    ({"env": {**CARD_ENV, "HARBOR_N_TASKS": "51"}}, "env", "HARBOR_N_TASKS"),
    ({"env": {**CARD_ENV, "HARBOR_N_TASKS": "0"}}, "env", "HARBOR_N_TASKS"),
    ({"compute": "gpu", "gpu_type": "L4"}, "compute", "CPU"),
]


def credit(org, micros: int, kind=Kind.CREDIT) -> None:
    ledger_operator_entry(organization=org, kind=kind, amount_micros=micros, note="test")


def create(tenant, **fields):
    body = {"preset": "harbor-runner", "name": "Managed", **fields}
    return tenant.api.post("/api/v1/harnesses", body, format="json")


@pytest.mark.parametrize("change,field,words", REFUSALS)
def test_a_managed_harbor_harness_that_changes_the_driver_is_refused_naming_it(
    owner, change, field, words
):
    response = create(owner, **change)

    assert response.status_code == 400
    message = response.json()[field][0]
    assert words in message
    assert "managed Harbor workspace" in message and "MODAL_TOKEN_ID" in message
    assert not Harness.objects.filter(name="Managed").exists()


@pytest.mark.parametrize("change,field,words", REFUSALS)
def test_both_modal_tokens_lift_every_managed_rule(owner, change, field, words):
    env = {**change.get("env", CARD_ENV), **MODAL}

    response = create(owner, **{**change, "env": env})

    assert response.status_code == 201, response.json()


def test_one_modal_token_alone_is_not_your_own_modal_account(owner):
    env = {**CARD_ENV, "HARBOR_CONCURRENCY": "8", "MODAL_TOKEN_ID": "ak-123"}

    response = create(owner, env=env)

    assert response.status_code == 400
    assert "HARBOR_CONCURRENCY" in response.json()["env"][0]


AVAILABLE_HARBOR_CARDS = sorted(
    p.slug for p in catalog.PRESETS if p.repo == catalog.HARBOR_REPO and p.available
)


@pytest.mark.usefixtures("owner_pays_as_you_go")
@pytest.mark.parametrize("slug", AVAILABLE_HARBOR_CARDS)
def test_every_harbor_card_as_shipped_is_a_valid_managed_harness(owner, slug):
    response = create(owner, preset=slug)

    assert response.status_code == 201, response.json()
    assert managed.is_managed(
        repo_url=response.json()["repo_url"], preset=slug, env=response.json()["env"]
    )


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_the_documented_env_limits_are_accepted(owner):
    env = {key: "x" for key in managed.MANAGED_ENV} | {
        "HARBOR_AGENT": "terminus-2",
        "HARBOR_CONCURRENCY": "4",
        "HARBOR_N_TASKS": "",
        "MODAL_TOKEN_ID": "",
        "MODAL_TOKEN_SECRET": "",
    }

    assert create(owner, env=env, tasks="").status_code == 201  # HARBOR_DATASET names the tasks


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_an_update_that_breaks_a_rule_is_refused_too(owner):
    harness = create(owner).json()

    response = owner.api.patch(
        f"/api/v1/harnesses/{harness['id']}",
        {"env": {**CARD_ENV, "HARBOR_CONCURRENCY": "16"}},
        format="json",
    )

    assert response.status_code == 400
    assert "HARBOR_CONCURRENCY" in response.json()["env"][0]


def test_other_harnesses_are_not_managed(owner):
    runner = create(owner, preset="runner", env={"ANYTHING": "1"}, install_command="make")

    assert runner.status_code == 201
    assert not managed.is_harbor(repo_url=drivers.served_url(catalog.RUNNER_REPO), preset="")
    assert managed.is_harbor(repo_url=drivers.served_url(catalog.HARBOR_REPO), preset="")


def launch(tenant, harness_id):
    return tenant.api.post("/api/v1/runs", {"harness": harness_id}, format="json")


def test_a_harness_saved_before_the_rules_is_refused_at_launch_naming_the_variable(owner):
    harness_id = create(owner, env={**CARD_ENV, **MODAL}).json()["id"]
    # Saved while on the user's Modal account, then the tokens are taken away behind the
    # API's back (as a harness saved before these rules existed would be).
    Harness.objects.filter(pk=harness_id).update(
        env={**CARD_ENV, "HARBOR_CONCURRENCY": "9"}, env_secrets_encrypted=""
    )
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="test"
    )

    response = launch(owner, harness_id)

    assert response.status_code == 400
    message = response.json()["harness"][0]
    assert "HARBOR_CONCURRENCY" in message and "managed-workspace rule" in message


def test_a_harness_saved_with_credits_is_refused_at_launch_once_the_balance_is_zero(owner):
    credit(owner.org, 1_000_000)
    harness_id = create(owner).json()["id"]
    credit(owner.org, -1_000_000, kind=Kind.ADJUSTMENT)  # spent

    response = launch(owner, harness_id)

    assert response.status_code == 402
    assert response.json()["code"] == "managed_credits"
    assert "$0.00" in response.json()["detail"] and "pay as you go" in response.json()["detail"]


def test_credits_or_pay_as_you_go_satisfy_the_launch_condition(owner):
    credit(owner.org, 1_000_000)
    harness = Harness.objects.get(pk=create(owner).json()["id"])
    managed.managed_launch_check(harness=harness, organization=owner.org)  # no refusal

    credit(owner.org, -1_000_000, kind=Kind.ADJUSTMENT)  # spent
    with pytest.raises(Exception, match=r"\$0\.00"):
        managed.managed_launch_check(harness=harness, organization=owner.org)
    account_update(organization=owner.org, pay_as_you_go=True)
    managed.managed_launch_check(harness=harness, organization=owner.org)


def test_a_launch_on_your_own_modal_account_needs_no_credits(owner):
    harness = Harness.objects.get(pk=create(owner, env={**CARD_ENV, **MODAL}).json()["id"])

    managed.managed_launch_check(harness=harness, organization=owner.org)  # no refusal


def _tasks(count: int) -> str:
    import json

    return json.dumps([{"id": f"t{n}", "prompt": f"Question {n}?"} for n in range(count)])


UNCAPPED = {key: value for key, value in CARD_ENV.items() if key != "HARBOR_N_TASKS"}


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_more_tasks_than_the_managed_limit_are_refused_at_save_naming_both_numbers(owner):
    response = create(owner, env=UNCAPPED, tasks=_tasks(51))
    assert response.status_code == 400
    message = response.json()["env"][0]
    assert "would run 51 tasks (its Tasks field)" in message
    assert "runs at most 50 in a run" in message and "HARBOR_N_TASKS" in message
    # 50 run whole; a cap, task names or the user's own Modal account let 51 through.
    assert create(owner, env=UNCAPPED, tasks=_tasks(50), name="Fifty").status_code == 201
    for name, env in [
        ("Capped", {**UNCAPPED, "HARBOR_N_TASKS": "50"}),
        ("Named", {**UNCAPPED, "HARBOR_TASK_NAMES": "t1,t2"}),
        ("Modal", {**UNCAPPED, **MODAL}),
    ]:
        assert create(owner, env=env, tasks=_tasks(51), name=name).status_code == 201, name


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_an_environment_past_the_limit_is_refused_at_save_and_at_launch(owner):
    from harnesses.environments import environment_create, environment_harness_create

    tasks = [{"id": f"t{n}", "prompt": f"Question {n}?"} for n in range(51)]
    big = environment_create(project=owner.project, created_by=owner.user, name="Big", tasks=tasks)
    with pytest.raises(Invalid, match=r"would run 51 tasks \(its Tasks field\).*at most 50"):
        environment_harness_create(environment=big, preset="harbor-runner")
    # The environment a dataset names counts too...
    response = create(owner, env={**UNCAPPED, "HARBOR_DATASET": f"belvedir:{big.pk}"}, tasks="")
    assert response.status_code == 400
    assert "would run 51 tasks (the environment Big)" in response.json()["env"][0]
    # ...at launch as well: it grew past the limit after the harness was saved.
    small = environment_create(
        project=owner.project, created_by=owner.user, name="Small", tasks=tasks[:3]
    )
    saved = create(
        owner, env={**UNCAPPED, "HARBOR_DATASET": f"belvedir:{small.pk}"}, name="S", tasks=""
    )
    assert saved.status_code == 201, saved.json()
    small.__class__.objects.filter(pk=small.pk).update(task_count=60)
    refused = launch(owner, saved.json()["id"])
    assert refused.status_code == 400
    assert "would run 60 tasks (the environment Small)" in refused.json()["harness"][0]


# --- the Tasks field of a Harbor harness ---------------------------------------------------------


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_suite_card_refuses_a_tasks_field_naming_it(owner):
    response = create(owner, preset="gaia", tasks=_tasks(2))
    assert response.status_code == 400
    message = response.json()["tasks"][0]
    assert "The GAIA card brings its own tasks (HARBOR_DATASET gaia)" in message
    assert "Tasks field must stay blank" in message


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_dataset_and_a_tasks_field_together_are_refused_naming_both(owner):
    env = {**CARD_ENV, "HARBOR_DATASET": "belvedir-sample"}
    response = create(owner, env=env, tasks=_tasks(2))
    assert response.status_code == 400
    message = response.json()["tasks"][0]
    assert "Both HARBOR_DATASET (belvedir-sample) and the Tasks field" in message
    assert create(owner, env=env, tasks="", name="Dataset").status_code == 201
    assert create(owner, env=CARD_ENV, tasks=_tasks(2), name="Tasks").status_code == 201


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_a_harbor_cards_tasks_are_checked_at_save_as_a_task_list(owner):
    response = create(owner, tasks='[{"prompt": "no id"}, {"id": "x", "verifier": {"kind": "?"}}]')
    assert response.status_code == 400
    assert "tasks[1] (id 'x'): prompt is required" in response.json()["tasks[1].prompt"][0]
    # The Runner's example on every Harbor card passes.
    for slug in ("harbor-runner", "openclaw", "opencode", "pi"):
        assert create(owner, preset=slug, name=slug).status_code == 201
