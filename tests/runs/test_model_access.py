"""Which model a run reaches and who pays: a blank base resolved from the model id, covered
usage through the router with the run's key, and the launches refused before anything runs."""

import pytest

from belvedir.errors import Invalid
from runs import contract, services
from runs.model_access import model_access_check, router_base
from runs.models import Run


def check(project, *, gpu=False, harness_env=None, **given):
    values = {
        "model": "",
        "model_api_base": "",
        "model_api_key": "",
        "judge_model": "",
        "judge_api_base": "",
        "judge_api_key": "",
    }
    return model_access_check(
        project=project, gpu=gpu, harness_env=harness_env or {}, **(values | given)
    )


def test_a_covered_model_with_a_blank_key_goes_through_the_router(owner, upstream):
    access = check(owner.project, model="meta-llama/llama-3.1-8b-instruct")
    assert access.model.covered and access.covered
    assert access.model.api_base == "http://172.30.0.1:18700/api/v1"
    assert not access.judge.covered


def test_a_covered_judge_with_a_blank_key_goes_through_the_router(owner, upstream):
    access = check(
        owner.project, model="gpt-4o", model_api_key="sk-own", judge_model="google/gemma-3-27b-it"
    )
    assert not access.model.covered and access.judge.covered and access.covered
    assert access.model.api_base == "https://api.openai.com/v1"
    assert access.judge.api_base == "http://172.30.0.1:18700/api/v1"


@pytest.mark.parametrize(
    "model, base",
    [
        ("anthropic/claude-sonnet-4.5", "https://openrouter.ai/api/v1"),
        ("gpt-4o-mini", "https://api.openai.com/v1"),
        ("claude-sonnet-4-5", "https://api.anthropic.com/v1/"),
        ("gemini-2.5-pro", "https://generativelanguage.googleapis.com/v1beta/openai/"),
        ("my-finetune", "https://openrouter.ai/api/v1"),
    ],
)
def test_a_run_with_its_own_key_gets_the_inferred_base(owner, upstream, model, base):
    access = check(owner.project, model=model, model_api_key="sk-own")
    assert access.model.api_base == base and not access.covered


def test_on_a_gpu_harness_a_blank_base_stays_blank_and_nothing_is_covered(owner, upstream):
    access = check(owner.project, gpu=True, model="Qwen/Qwen2.5-7B-Instruct")
    assert access.model.api_base == "" and not access.covered
    own_key = check(owner.project, gpu=True, model="gpt-4o", model_api_key="sk-own")
    assert own_key.model.api_base == ""


def test_a_base_the_user_names_is_kept_and_needs_no_key(owner, upstream):
    access = check(owner.project, model="my-vllm-model", model_api_base="http://10.1.2.3:8000/v1")
    assert access.model.api_base == "http://10.1.2.3:8000/v1" and not access.covered


def test_the_harness_env_counts_as_given(owner, upstream):
    keyed = check(owner.project, model="qwen/qwen3-32b", harness_env={"MODEL_API_KEY": "sk-h"})
    assert not keyed.covered and keyed.model.api_base == "https://openrouter.ai/api/v1"
    from_env = check(owner.project, harness_env={"MODEL": "meta-llama/llama-3.3-70b-instruct"})
    assert from_env.model.covered
    judge = check(owner.project, harness_env={"JUDGE_MODEL": "google/gemma-3-27b-it"})
    assert judge.judge.covered and not judge.model.covered
    with pytest.raises(Invalid) as refused:
        check(owner.project, harness_env={"JUDGE_MODEL": "openai/gpt-4.1-mini"})
    assert refused.value.field == "judge_api_key"


def test_no_model_named_means_nothing_to_resolve_or_refuse(owner, settings):
    settings.BELVEDIR_ROUTER_UPSTREAM_KEY = ""
    access = check(owner.project)
    assert access.model.api_base == "" and not access.covered


def test_a_blank_key_with_a_model_not_covered_is_refused_naming_it(owner, upstream):
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="openai/gpt-4.1-mini")
    assert refused.value.field == "model_api_key"
    assert "openai/gpt-4.1-mini" in refused.value.message
    assert "set MODEL_API_KEY" in refused.value.message


def test_a_disabled_catalog_model_is_not_covered(owner, upstream):
    from models_registry.models import CoveredModel

    CoveredModel.objects.filter(model_id="meta-llama/llama-3.1-8b-instruct").update(enabled=False)
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="meta-llama/llama-3.1-8b-instruct")
    assert refused.value.field == "model_api_key"


def test_a_blank_judge_key_with_a_judge_not_covered_is_refused_naming_it(owner, upstream):
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="gpt-4o", model_api_key="sk-own", judge_model="gpt-4o")
    assert refused.value.field == "judge_api_key"
    assert "gpt-4o" in refused.value.message and "set JUDGE_API_KEY" in refused.value.message


def test_a_platform_with_no_upstream_key_covers_nothing(owner, settings):
    settings.BELVEDIR_ROUTER_UPSTREAM_KEY = ""
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="meta-llama/llama-3.1-8b-instruct")
    assert refused.value.field == "model_api_key"
    assert "meta-llama/llama-3.1-8b-instruct" in refused.value.message
    assert "set MODEL_API_KEY" in refused.value.message


@pytest.mark.parametrize(
    "model, lab", [("qwen/qwen3-32b", "Qwen"), ("moonshotai/kimi-k2", "Moonshot")]
)
def test_a_covered_chinese_lab_model_is_refused_while_the_project_does_not_allow_it(
    owner, upstream, model, lab
):
    with pytest.raises(Invalid) as refused:
        check(owner.project, model=model)
    assert refused.value.field == "model" and refused.value.code == "chinese_models"
    message = refused.value.message
    assert model in message and lab in message and "Chinese models" in message
    owner.project.chinese_models_allowed = True
    assert check(owner.project, model=model).model.covered


def test_a_covered_chinese_judge_is_refused_too(owner, upstream):
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="gpt-4o", model_api_key="k", judge_model="deepseek/deepseek-r1")
    assert refused.value.field == "judge_model" and "DeepSeek" in refused.value.message


def test_a_chinese_model_with_the_users_own_key_follows_no_permission(owner, upstream):
    access = check(owner.project, model="deepseek/deepseek-r1", model_api_key="sk-own")
    assert access.model.api_base == "https://openrouter.ai/api/v1"


def test_refused_launches_write_nothing(owner, upstream, make_harness):
    harness = make_harness()
    for model, field in [("openai/gpt-4.1-mini", "model_api_key"), ("qwen/qwen3-32b", "model")]:
        with pytest.raises(Invalid) as refused:
            services.run_launch(project=owner.project, harness=harness, model=model)
        assert refused.value.field == field
    assert not Run.objects.exists()


def test_the_api_refusal_names_the_field(owner, upstream, make_harness):
    harness = make_harness()
    response = owner.api.post(
        "/api/v1/runs", {"harness": harness.pk, "model": "openai/gpt-4.1-mini"}, format="json"
    )
    assert response.status_code == 400
    assert "MODEL_API_KEY" in response.json()["model_api_key"][0]


ROUTER = "http://172.30.0.1:18700/api/v1"


def test_the_sandbox_of_a_covered_run_gets_the_router_and_the_run_key():
    env = contract.sandbox_env(
        harness_env={"MODEL_API_BASE": "https://harness.example/v1", "OTHER": "x"},
        run_id="run_1",
        run_key="bv_run_key",
        base_url="http://172.30.0.1:18700",
        tasks="",
        attempts=1,
        grading="pass@1",
        model_settings=contract.model_settings(
            model="qwen/qwen3-32b",
            model_api_base=ROUTER,
            model_api_key="",
            model_routed=True,
            judge_model="gpt-4o",
            judge_api_base="https://api.openai.com/v1",
            judge_api_key="sk-judge",
            judge_routed=False,
            run_key="bv_run_key",
            router_base=router_base("http://172.30.0.1:18700/"),
        ),
    )
    assert env["MODEL"] == "qwen/qwen3-32b"
    assert env["MODEL_API_BASE"] == ROUTER
    assert env["MODEL_API_KEY"] == "bv_run_key" == env["BELVEDIR_API_KEY"]
    assert env["JUDGE_API_BASE"] == "https://api.openai.com/v1"
    assert env["JUDGE_API_KEY"] == "sk-judge"
    assert env["OTHER"] == "x"
    assert "ANTHROPIC_BASE_URL" not in env  # not Anthropic's model


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4.5", "claude-haiku-4-5"])
def test_a_covered_anthropic_model_gives_anthropics_clients_the_router_and_the_run_key(model):
    def settings_for(covered: bool) -> dict:
        return contract.model_settings(
            model=model,
            model_api_base="https://openrouter.ai/api/v1",
            model_api_key="" if covered else "sk-own",
            model_routed=covered,
            judge_model="",
            judge_api_base="",
            judge_api_key="",
            judge_routed=False,
            run_key="bv_run_key",
            router_base=ROUTER,
        )

    covered = settings_for(True)
    # Anthropic's clients add /v1/messages: the router serves POST /api/v1/messages.
    assert covered["ANTHROPIC_BASE_URL"] == "http://172.30.0.1:18700/api"
    assert covered["ANTHROPIC_API_KEY"] == "bv_run_key" == covered["MODEL_API_KEY"]
    # Not through the router (BELVEDIR_MODEL_PROXY=off): your Anthropic settings are kept.
    assert "ANTHROPIC_API_KEY" not in settings_for(False)


def test_a_covered_judge_gets_the_router_and_the_model_keeps_its_own_key():
    settings_ = contract.model_settings(
        model="gpt-4o",
        model_api_base="https://api.openai.com/v1",
        model_api_key="sk-own",
        model_routed=False,
        judge_model="meta-llama/llama-3.3-70b-instruct",
        judge_api_base="",
        judge_api_key="",
        judge_routed=True,
        run_key="bv_run_key",
        router_base=ROUTER,
    )
    assert settings_["MODEL_API_BASE"] == "https://api.openai.com/v1"
    assert settings_["MODEL_API_KEY"] == "sk-own"
    assert settings_["JUDGE_API_BASE"] == ROUTER and settings_["JUDGE_API_KEY"] == "bv_run_key"


@pytest.mark.docker
def test_a_covered_launch_stores_the_router_the_cap_and_what_is_covered(owner, upstream, launch):
    run = launch(model="meta-llama/llama-3.1-8b-instruct")
    assert run.covered and run.model_covered and not run.judge_covered
    assert run.covered_cap_micros == 2_000_000
    assert run.model_api_base_resolved == ROUTER
    assert run.model_api_base == ""  # what the user gave stays as given
    body = owner.api.get(f"/api/v1/runs/{run.pk}").json()
    assert body["covered"] is True
    assert body["covered_cap_micros"] == 2_000_000 and body["covered_spent_micros"] == 0
    assert body["model_api_base_resolved"] == ROUTER


@pytest.mark.docker
def test_a_launch_with_its_own_key_stores_the_inferred_base_and_is_not_covered(
    owner, upstream, launch
):
    run = launch(model="claude-sonnet-4-5", model_api_key="sk-ant")
    assert not run.covered and run.covered_cap_micros == 0
    assert run.model_api_base_resolved == "https://api.anthropic.com/v1/"


def test_the_run_page_shows_the_resolved_base_and_the_covered_spend(owner, make_run):
    run = make_run(
        model="qwen/qwen3-32b",
        model_api_base_resolved=ROUTER,
        model_covered=True,
        covered=True,
        covered_cap_micros=2_000_000,
        covered_spent_micros=12_345,
    )
    page = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert ROUTER in page and "covered" in page
    assert "$0.012345 of $2.00" in page  # exact: a few micro-dollars never show as $0.0000
    inferred = make_run(model="gpt-4o", model_api_base_resolved="https://api.openai.com/v1")
    page = owner.web.get(f"/runs/{inferred.pk}/").content.decode()
    assert "https://api.openai.com/v1" in page and "inferred from the model id" in page
    assert "Covered spend" not in page


def test_the_launch_dialog_shows_the_refusal_on_the_key_field(owner, upstream, make_harness):
    harness = make_harness(name="dialog")
    response = owner.web.post(
        f"/runs/launch/{harness.pk}/",
        {"attempts": 1, "grading": "pass@1", "model": "qwen/qwen3-32b"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Qwen" in page and "Chinese models" in page
    response = owner.web.post(
        f"/runs/launch/{harness.pk}/",
        {"attempts": 1, "grading": "pass@1", "model": "openai/gpt-4.1-mini"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400 and "set MODEL_API_KEY" in response.content.decode()
    assert not Run.objects.exists()


def test_the_routers_check_refuses_what_a_launch_would(owner, upstream):
    from runs.model_access import covered_model_check

    entry = covered_model_check(project=owner.project, model="google/gemma-3-27b-it")
    assert entry.input_price_micros == 100_000
    with pytest.raises(Invalid) as chinese:
        covered_model_check(project=owner.project, model="z-ai/glm-4.5")
    assert chinese.value.code == "chinese_models" and "Zhipu" in chinese.value.message
    with pytest.raises(Invalid) as uncovered:
        covered_model_check(project=owner.project, model="openai/gpt-4o")
    assert uncovered.value.code == "model_not_covered"


def test_a_covered_chinese_model_filed_under_another_lab_is_still_refused(owner, upstream):
    # An operator files NVIDIA's FP4 build of DeepSeek R1 under NVIDIA: the model name still
    # says DeepSeek, so the project's permission applies.
    from models_registry.models import CoveredModel, Lab

    nvidia = Lab.objects.get(slug="nvidia")
    CoveredModel.objects.create(
        model_id="nvidia/deepseek-r1-0528-fp4",
        display_name="DeepSeek R1 FP4",
        lab=nvidia,
        input_price_micros=500_000,
        output_price_micros=2_000_000,
    )
    with pytest.raises(Invalid) as refused:
        check(owner.project, model="nvidia/deepseek-r1-0528-fp4")
    assert refused.value.code == "chinese_models" and "DeepSeek" in refused.value.message
    owner.project.chinese_models_allowed = True
    assert check(owner.project, model="nvidia/deepseek-r1-0528-fp4").model.covered


@pytest.mark.parametrize("allowed", [False, True])
def test_the_routers_model_list_is_what_the_check_lets_through_in_two_queries(
    owner, upstream, allowed, django_assert_max_num_queries
):
    """The router's GET /models lists the entries a covered run may call: the same answer as
    `covered_model_check` on each (the seeded catalog, an NVIDIA-filed DeepSeek build and a
    disabled entry), read in two queries whatever the catalog's size, not two per entry."""
    from models_registry.models import CoveredModel, Lab
    from router.selectors import covered_models_allowed
    from runs.model_access import covered_model_check

    nvidia = Lab.objects.get(slug="nvidia")
    for model_id, enabled in [("nvidia/deepseek-r1-0528-fp4", True), ("nvidia/off", False)]:
        CoveredModel.objects.create(
            model_id=model_id,
            display_name=model_id,
            lab=nvidia,
            input_price_micros=1,
            output_price_micros=1,
            enabled=enabled,
        )
    owner.project.chinese_models_allowed = allowed

    def passes(model_id: str) -> bool:
        try:
            covered_model_check(project=owner.project, model=model_id)
        except Invalid:
            return False
        return True

    expected = [m for m in CoveredModel.objects.values_list("model_id", flat=True) if passes(m)]
    with django_assert_max_num_queries(2):
        listed = [entry.model_id for entry in covered_models_allowed(project=owner.project)]
    assert sorted(listed) == sorted(expected)
    assert ("z-ai/glm-4.5" in listed) is allowed
    assert ("nvidia/deepseek-r1-0528-fp4" in listed) is allowed
    assert "google/gemma-3-27b-it" in listed and "nvidia/off" not in listed
    with django_assert_max_num_queries(0):
        upstream.BELVEDIR_ROUTER_UPSTREAM_KEY = ""
        assert covered_models_allowed(project=owner.project) == []
