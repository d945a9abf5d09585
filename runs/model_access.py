"""How a run reaches its model and its judge: the base a blank MODEL_API_BASE stands for, and
whether the platform covers the usage (a blank key with a covered model: through the router).

Checked at launch, before anything is written; the executor hands the sandbox what was decided.
"""

from dataclasses import dataclass

from django.conf import settings

from belvedir.errors import Invalid
from belvedir.models import Project
from belvedir.net_policy import model_base_refusal
from harnesses.catalog import JUDGED_CARDS
from models_registry.inference import resolve_api_base
from models_registry.models import CoveredModel
from models_registry.selectors import chinese_lab_for_model, covered_model

ROUTER_PATH = "/api/v1"


def router_base(sandbox_base_url: str) -> str:
    """The router as a sandbox reaches it (the OpenAI client appends /chat/completions)."""
    return sandbox_base_url.rstrip("/") + ROUTER_PATH


@dataclass(frozen=True)
class Access:
    """One model's access: its base, whether the platform pays, whether the router proxies."""

    api_base: str
    covered: bool = False
    proxied: bool = False


@dataclass(frozen=True)
class ModelAccess:
    model: Access
    judge: Access

    @property
    def covered(self) -> bool:
        return self.model.covered or self.judge.covered


def _refuse_chinese(*, project: Project, name: str, catalog_lab, field: str) -> None:
    lab = catalog_lab if catalog_lab.is_chinese else chinese_lab_for_model(name)
    if lab is None or project.chinese_models_allowed:
        return
    raise Invalid(
        f"{name} is a model of {lab.name}, a Chinese lab, and the project {project.name} does "
        "not allow Chinese models for covered runs. An owner or admin can turn on "
        "“Chinese models” in Project settings (chinese_models_allowed), or give the run "
        "a key of your own.",
        field=field,
        code="chinese_models",
    )


def covered_model_check(*, project: Project, model: str, field: str = "model") -> CoveredModel:
    """The catalog entry of a model the platform may pay for in `project`'s runs (what a launch
    with a blank key, and the router on each call, check); Invalid names what stops it."""
    entry = covered_model(model)
    if entry is None or not settings.BELVEDIR_ROUTER_UPSTREAM_KEY:
        prefix = "JUDGE" if field.startswith("judge") else "MODEL"
        why = (
            "is not one of the models Belvedir covers"
            if settings.BELVEDIR_ROUTER_UPSTREAM_KEY
            else "cannot be covered: this platform covers no model usage"
        )
        raise Invalid(
            f"The {prefix.lower()} {model} {why}, so its key cannot be left blank: "
            f"set {prefix}_API_KEY (and {prefix}_API_BASE for a provider other than OpenRouter).",
            field=f"{prefix.lower()}_api_key",
            code="model_not_covered",
        )
    _refuse_chinese(project=project, name=model, catalog_lab=entry.lab, field=field)
    return entry


def _access(
    *,
    project: Project,
    prefix: str,
    name: str,
    api_base: str,
    api_key: str,
    gpu: bool,
    called: bool = True,
    proxy: bool = True,
) -> Access:
    if not called:
        # The harness never calls it (a Harbor oracle run): the name only tags the run.
        return Access(api_base=api_base)
    if not name or api_key or api_base:
        # No model to reach, a key of the user's own (proxied unless BELVEDIR_MODEL_PROXY=off),
        # or an endpoint they named (their own server may need no key): the platform pays nothing.
        base = resolve_api_base(model=name, api_base=api_base, gpu=gpu) if name else api_base
        proxied = bool(proxy and name and api_key and base)
        if proxied and (refusal := model_base_refusal(base)):
            message, field = f"{prefix}_API_BASE {base}: {refusal}.", f"{prefix.lower()}_api_base"
            raise Invalid(message, field=field, code="model_base_refused")
        return Access(api_base=base, proxied=proxied)
    if gpu:
        return Access(api_base="")  # the harness serves the model itself
    field = "model" if prefix == "MODEL" else "judge_model"
    covered_model_check(project=project, model=name, field=field)
    return Access(api_base=router_base(settings.BELVEDIR_SANDBOX_BASE_URL), covered=True)


def model_access_check(
    *,
    project: Project,
    gpu: bool,
    harness_env: dict[str, str],
    model: str,
    model_api_base: str,
    model_api_key: str,
    judge_model: str,
    judge_api_base: str,
    judge_api_key: str,
    model_called: bool = True,
) -> ModelAccess:
    """Resolve the model's and the judge's access; raise Invalid for a launch that must not run.

    Each value is the one given at launch, else the harness env's (which the sandbox would get).
    `model_called` False (the harness's agent calls no model): the model needs no key and is
    never covered; the judge is checked all the same (a verifier may call it).
    """

    def value(given: str, name: str) -> str:
        return given.strip() or str(harness_env.get(name) or "").strip()

    if (proxy := value("", "BELVEDIR_MODEL_PROXY").lower()) not in ("", "on", "off"):
        raise Invalid("BELVEDIR_MODEL_PROXY must be on or off.", field="env", code="proxy")

    accesses = {}
    for prefix, name, base, key in [
        ("MODEL", model, model_api_base, model_api_key),
        ("JUDGE", judge_model, judge_api_base, judge_api_key),
    ]:
        accesses[prefix] = _access(
            project=project,
            prefix=prefix,
            name=value(name, "MODEL" if prefix == "MODEL" else "JUDGE_MODEL"),
            api_base=value(base, f"{prefix}_API_BASE"),
            api_key=value(key, f"{prefix}_API_KEY"),
            gpu=gpu,
            called=model_called or prefix != "MODEL",
            proxy=proxy != "off",
        )
    return ModelAccess(model=accesses["MODEL"], judge=accesses["JUDGE"])


@dataclass(frozen=True)
class Judge:
    """The judge a launch with a blank JUDGE_MODEL gets, where it comes from, and who pays."""

    model: str
    source: str  # "harness env" or "platform default"
    coverage: str  # the sentence the launch dialog shows


def default_judge(*, preset: str, harness_env: dict[str, str]) -> tuple[str, str]:
    """(the judge, where it comes from) for a launch that names none: the harness env's
    JUDGE_MODEL, else a judged card's platform default (BELVEDIR_DEFAULT_JUDGE_MODEL); ("", "")
    for a harness without a judge."""
    named = str(harness_env.get("JUDGE_MODEL") or "").strip()
    if named:
        return named, "harness env"
    if preset in JUDGED_CARDS:
        return settings.BELVEDIR_DEFAULT_JUDGE_MODEL, "platform default"
    return "", ""


def judge_shown(*, project: Project, preset: str, harness_env: dict[str, str]) -> Judge | None:
    """What the launch dialog says of the judge a blank JUDGE_MODEL gets, or None."""
    model, source = default_judge(preset=preset, harness_env=harness_env)
    if not model:
        return None
    if any(str(harness_env.get(k) or "").strip() for k in ("JUDGE_API_KEY", "JUDGE_API_BASE")):
        return Judge(model, source, "called with the harness's own JUDGE_API_KEY / JUDGE_API_BASE")
    try:
        covered_model_check(project=project, model=model, field="judge_model")
    except Invalid as exc:
        return Judge(model, source, f"not covered: {exc.message}")
    return Judge(model, source, "covered by Belvedir: leave JUDGE_API_KEY blank")
