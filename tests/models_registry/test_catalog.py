"""The seeded catalog: which lab made a model (and whether it is a Chinese lab), what is covered."""

import pytest

from models_registry.inference import (
    ANTHROPIC,
    GOOGLE,
    OPENAI,
    OPENROUTER,
    infer_api_base,
    resolve_api_base,
)
from models_registry.models import CoveredModel, Lab
from models_registry.selectors import chinese_lab_for_model, covered_model, lab_for_model

pytestmark = pytest.mark.django_db

CHINESE = [
    ("qwen/qwen3-32b", "qwen"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen"),
    ("qwq-32b", "qwen"),
    ("alibaba/tongyi-deepresearch-30b-a3b", "qwen"),
    ("deepseek-chat", "deepseek"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "deepseek"),
    ("deepseek/deepseek-r1", "deepseek"),
    ("moonshotai/kimi-k2", "moonshot"),
    ("kimi-k2-0905-preview", "moonshot"),
    ("thudm/glm-4", "zhipu"),
    ("z-ai/glm-4.5", "zhipu"),
    ("glm-4-plus", "zhipu"),
    ("minimax/minimax-m1", "minimax"),
    ("MiniMax-Text-01", "minimax"),
    ("baichuan-inc/Baichuan2-13B-Chat", "baichuan"),
    ("01-ai/Yi-34B-Chat", "01-ai"),
    ("yi-large", "01-ai"),
    ("internlm/internlm2_5-7b-chat", "internlm"),
    ("stepfun-ai/step3", "stepfun"),
    ("baidu/ernie-4.5-300b-a47b", "baidu"),
    ("ernie-4.0-8k", "baidu"),
    ("tencent/hunyuan-a13b-instruct", "tencent"),
    ("bytedance/ui-tars-1.5-7b", "bytedance"),
    ("doubao-seed-1-6", "bytedance"),
    ("accounts/fireworks/models/qwen3-235b-a22b", "qwen"),
]

NOT_CHINESE = [
    ("meta-llama/llama-3.1-8b-instruct", "meta"),
    ("llama-3.3-70b-versatile", "meta"),
    ("mistralai/mistral-small-3.2-24b-instruct", "mistral"),
    ("mixtral-8x7b", "mistral"),
    ("google/gemma-3-27b-it", "google"),
    ("gemini-2.5-pro", "google"),
    ("openai/gpt-oss-120b", "openai"),
    ("gpt-4o-mini", "openai"),
    ("o3-mini", "openai"),
    ("claude-sonnet-4-5", "anthropic"),
    ("anthropic/claude-sonnet-4.5", "anthropic"),
    ("microsoft/phi-4", "microsoft"),
    ("phi-3-mini", "microsoft"),
    ("nvidia/llama-3.1-nemotron-70b-instruct", "nvidia"),
]


@pytest.mark.parametrize("model_id, slug", CHINESE)
def test_a_chinese_lab_model_is_matched_to_its_chinese_lab(model_id, slug):
    lab = lab_for_model(model_id)
    assert lab is not None and lab.slug == slug
    assert lab.is_chinese


@pytest.mark.parametrize("model_id, slug", NOT_CHINESE)
def test_a_model_of_another_lab_is_matched_and_not_chinese(model_id, slug):
    lab = lab_for_model(model_id)
    assert lab is not None and lab.slug == slug
    assert not lab.is_chinese


@pytest.mark.parametrize("model_id", ["my-own-finetune", "acme/secret-model", "", "   "])
def test_an_unknown_model_has_no_lab(model_id):
    assert lab_for_model(model_id) is None


def test_the_vendor_prefix_decides_before_the_model_name():
    # A DeepSeek distill of Llama is DeepSeek's model; NVIDIA's Llama fine-tune is NVIDIA's.
    assert lab_for_model("deepseek-ai/DeepSeek-R1-Distill-Llama-8B").slug == "deepseek"
    assert lab_for_model("nvidia/llama-3.1-nemotron-70b-instruct").slug == "nvidia"


@pytest.mark.parametrize(
    "model_id, slug",
    [
        ("nvidia/DeepSeek-R1-0528-FP4", "deepseek"),  # another maker's build of DeepSeek's model
        ("meta-llama/qwen3-32b", "qwen"),  # a vendor prefix that is not the model's lab
        ("QWEN/QWEN3-32B:free", "qwen"),
        ("accounts/fireworks/models/kimi-k2-instruct", "moonshot"),
        ("openrouter/z-ai/glm-4.5", "zhipu"),
        ("deepseek/llama-3.1-8b", "deepseek"),  # the vendor alone is enough
    ],
)
def test_a_chinese_lab_is_found_by_the_vendor_or_by_the_model_name(model_id, slug):
    lab = chinese_lab_for_model(model_id)
    assert lab is not None and lab.slug == slug


@pytest.mark.parametrize(
    "model_id", ["nvidia/llama-3.1-nemotron-70b-instruct", "mistralai/mixtral-8x7b", "", "acme/x"]
)
def test_a_model_of_no_chinese_lab_has_no_chinese_lab(model_id):
    assert chinese_lab_for_model(model_id) is None


def test_an_operator_added_prefix_is_matched():
    Lab.objects.create(
        name="Example Lab", slug="example", is_chinese=True, name_prefixes="examplar-"
    )
    assert lab_for_model("examplar-7b").slug == "example"


def test_the_twelve_chinese_labs_are_seeded():
    assert Lab.objects.filter(is_chinese=True).count() >= 12


def test_the_seed_covers_real_open_models_with_prices_per_million_tokens():
    qwen = CoveredModel.objects.get(model_id="qwen/qwen3-32b")
    assert qwen.lab.slug == "qwen"
    assert qwen.input_price_micros == 100_000  # $0.10 / M tokens
    assert qwen.output_price_micros == 300_000
    assert CoveredModel.objects.filter(enabled=True).count() >= 8


def test_only_an_enabled_catalog_model_is_covered():
    assert covered_model("qwen/qwen3-32b").model_id == "qwen/qwen3-32b"
    assert covered_model(" qwen/qwen3-32b ").model_id == "qwen/qwen3-32b"
    CoveredModel.objects.filter(model_id="qwen/qwen3-32b").update(enabled=False)
    assert covered_model("qwen/qwen3-32b") is None
    assert covered_model("gpt-4o") is None
    assert covered_model("") is None


INFERENCE = [
    ("qwen/qwen3-32b", OPENROUTER),
    ("anthropic/claude-sonnet-4.5", OPENROUTER),
    ("openai/gpt-4o", OPENROUTER),
    ("gpt-4o-mini", OPENAI),
    ("gpt-5", OPENAI),
    ("o1", OPENAI),
    ("o1-preview", OPENAI),
    ("o3-mini", OPENAI),
    ("o4-mini", OPENAI),
    ("claude-sonnet-4-5", ANTHROPIC),
    ("claude-3-5-haiku-latest", ANTHROPIC),
    ("gemini-2.5-flash", GOOGLE),
    ("deepseek-chat", OPENROUTER),
    ("llama-3.1-8b", OPENROUTER),
    ("", OPENROUTER),
]


@pytest.mark.parametrize("model, base", INFERENCE)
def test_a_blank_base_is_inferred_from_the_model_id(model, base):
    assert infer_api_base(model) == base
    assert resolve_api_base(model=model, api_base="", gpu=False) == base


def test_the_providers_are_their_documented_openai_compatible_endpoints():
    assert OPENROUTER == "https://openrouter.ai/api/v1"
    assert OPENAI == "https://api.openai.com/v1"
    assert ANTHROPIC == "https://api.anthropic.com/v1/"
    assert GOOGLE == "https://generativelanguage.googleapis.com/v1beta/openai/"


@pytest.mark.parametrize("gpu", [False, True])
def test_a_given_base_is_kept_as_given(gpu):
    base = "https://my-vllm.example/v1"
    assert resolve_api_base(model="gpt-4o", api_base=f" {base} ", gpu=gpu) == base


def test_a_blank_base_on_a_gpu_harness_stays_blank():
    assert resolve_api_base(model="Qwen/Qwen2.5-7B-Instruct", api_base="", gpu=True) == ""
    assert resolve_api_base(model="gpt-4o", api_base="", gpu=True) == ""


def test_operators_find_covered_models_and_labs_in_the_admin(superuser):
    page = superuser.get("/admin/models_registry/coveredmodel/?lab__is_chinese__exact=1&q=kimi")
    assert page.status_code == 200
    assert b"moonshotai/kimi-k2" in page.content
    assert b"qwen/qwen3-32b" not in page.content
    labs = superuser.get("/admin/models_registry/lab/?is_chinese__exact=0")
    assert b"Mistral AI" in labs.content and b"DeepSeek" not in labs.content


def test_the_admin_shows_a_price_of_a_fraction_of_a_cent_exactly(superuser):
    CoveredModel.objects.filter(model_id="meta-llama/llama-3.1-8b-instruct").update(
        input_price_micros=15_000, output_price_micros=25_000
    )
    page = superuser.get("/admin/models_registry/coveredmodel/?q=llama-3.1-8b")
    assert page.status_code == 200
    html = page.content.decode()
    assert "$0.015" in html and "$0.025" in html  # $0.01 / $0.03 once, rounded


def test_an_operator_prices_a_covered_model_in_dollars_per_million_tokens(superuser):
    from django.contrib.admin.utils import quote

    form = {
        "model_id": "mistralai/mistral-nemo",
        "display_name": "Mistral Nemo",
        "lab": Lab.objects.get(slug="mistral").pk,
        "input_price_usd": "0.015",
        "output_price_usd": "0.035",
        "max_output_tokens": 8192,
        "enabled": "on",
    }
    response = superuser.post("/admin/models_registry/coveredmodel/add/", form)
    assert response.status_code == 302, response.content[:2000]
    entry = CoveredModel.objects.get(model_id="mistralai/mistral-nemo")
    assert (entry.input_price_micros, entry.output_price_micros) == (15_000, 35_000)
    page = superuser.get(f"/admin/models_registry/coveredmodel/{quote(entry.pk)}/change/")
    assert 'name="input_price_usd" value="0.015"' in page.content.decode()
    bad = superuser.post(
        "/admin/models_registry/coveredmodel/add/",
        form | {"model_id": "x/y", "input_price_usd": "-1", "output_price_usd": "0.0000001"},
    )
    assert bad.status_code == 200 and not CoveredModel.objects.filter(model_id="x/y").exists()
