"""Seed the labs (which are Chinese labs) and a handful of open models with public prices."""

from django.db import migrations

# (name, slug, is_chinese, vendor prefixes, bare name prefixes)
LABS = [
    ("Qwen (Alibaba)", "qwen", True, "qwen, alibaba, alibaba-nlp, alibaba-cloud", "qwen, qwq, qvq"),
    ("DeepSeek", "deepseek", True, "deepseek, deepseek-ai", "deepseek"),
    ("Moonshot AI (Kimi)", "moonshot", True, "moonshotai, moonshot", "kimi, moonshot"),
    ("Zhipu AI (Z.ai, GLM)", "zhipu", True, "z-ai, zai-org, zai, thudm, zhipuai, zhipu", "glm, chatglm, codegeex"),
    ("MiniMax", "minimax", True, "minimax, minimaxai", "minimax, abab"),
    ("Baichuan", "baichuan", True, "baichuan-inc, baichuan", "baichuan"),
    ("01.AI (Yi)", "01-ai", True, "01-ai, 01ai", "yi-"),
    ("InternLM (Shanghai AI Lab)", "internlm", True, "internlm, shanghai-ai-lab, opengvlab", "internlm, internvl, intern-s1"),
    ("StepFun", "stepfun", True, "stepfun-ai, stepfun", "step-, step1, step2, step3"),
    ("Baidu (ERNIE)", "baidu", True, "baidu, paddlepaddle", "ernie"),
    ("Tencent (Hunyuan)", "tencent", True, "tencent, tencent-hunyuan", "hunyuan"),
    ("ByteDance (Doubao, Seed)", "bytedance", True, "bytedance, bytedance-seed, bytedance-research", "doubao, seed-oss, ui-tars"),
    ("Meta (Llama)", "meta", False, "meta-llama, meta, facebook", "llama, meta-llama"),
    ("Mistral AI", "mistral", False, "mistralai, mistral", "mistral, mixtral, codestral, ministral, magistral, devstral, pixtral"),
    ("Google (Gemma, Gemini)", "google", False, "google", "gemma, gemini"),
    ("OpenAI", "openai", False, "openai", "gpt-, chatgpt, o1, o3, o4, gpt-oss"),
    ("Anthropic", "anthropic", False, "anthropic", "claude"),
    ("Microsoft (Phi)", "microsoft", False, "microsoft", "phi-"),
    ("NVIDIA", "nvidia", False, "nvidia", "nemotron"),
    ("Cohere", "cohere", False, "cohere, coherelabs, cohereforai", "command, aya"),
    ("xAI", "xai", False, "x-ai, xai-org", "grok"),
    ("Allen Institute for AI", "ai2", False, "allenai", "olmo, tulu, molmo"),
]

# (model id, display name, lab slug, $ in / M tokens, $ out / M tokens, max output tokens):
# public per-token prices of open models as listed by OpenRouter; operators adjust them.
MODELS = [
    ("meta-llama/llama-3.1-8b-instruct", "Llama 3.1 8B Instruct", "meta", "0.02", "0.03", 16384),
    ("meta-llama/llama-3.3-70b-instruct", "Llama 3.3 70B Instruct", "meta", "0.13", "0.40", 16384),
    ("qwen/qwen3-32b", "Qwen3 32B", "qwen", "0.10", "0.30", 16384),
    ("qwen/qwen-2.5-72b-instruct", "Qwen2.5 72B Instruct", "qwen", "0.12", "0.39", 16384),
    ("deepseek/deepseek-chat-v3-0324", "DeepSeek V3 0324", "deepseek", "0.27", "1.10", 16384),
    ("deepseek/deepseek-r1", "DeepSeek R1", "deepseek", "0.55", "2.19", 32768),
    ("moonshotai/kimi-k2", "Kimi K2", "moonshot", "0.60", "2.50", 16384),
    ("z-ai/glm-4.5", "GLM 4.5", "zhipu", "0.60", "2.20", 16384),
    ("mistralai/mistral-small-3.2-24b-instruct", "Mistral Small 3.2 24B", "mistral", "0.10", "0.30", 16384),
    ("google/gemma-3-27b-it", "Gemma 3 27B", "google", "0.10", "0.20", 8192),
    ("openai/gpt-oss-120b", "gpt-oss-120b", "openai", "0.15", "0.60", 32768),
]


def _micros(dollars: str) -> int:
    whole, _, cents = dollars.partition(".")
    return int(whole) * 1_000_000 + int((cents + "000000")[:6])


def seed(apps, schema_editor):
    Lab = apps.get_model("models_registry", "Lab")
    CoveredModel = apps.get_model("models_registry", "CoveredModel")
    labs = {}
    for name, slug, chinese, vendors, names in LABS:
        labs[slug], _ = Lab.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "is_chinese": chinese,
                "vendor_prefixes": vendors,
                "name_prefixes": names,
            },
        )
    for model_id, display, slug, price_in, price_out, max_output in MODELS:
        CoveredModel.objects.get_or_create(
            model_id=model_id,
            defaults={
                "display_name": display,
                "lab": labs[slug],
                "input_price_micros": _micros(price_in),
                "output_price_micros": _micros(price_out),
                "max_output_tokens": max_output,
            },
        )


def unseed(apps, schema_editor):
    apps.get_model("models_registry", "CoveredModel").objects.filter(
        model_id__in=[m[0] for m in MODELS]
    ).delete()
    apps.get_model("models_registry", "Lab").objects.filter(
        slug__in=[lab[1] for lab in LABS], covered_models=None
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("models_registry", "0001_catalog")]

    operations = [migrations.RunPython(seed, unseed)]
