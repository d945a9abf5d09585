"""The catalog of presets on the New Harness page (docs: Benchmarks → Start from the catalog).

The Runner, Runner-on-Harbor, suite and scaffold cards prefill the drivers the platform ships
and serves itself (`harnesses.drivers`, `{BELVEDIR_BASE_URL}/git/<name>.git`), so a card runs on
a fresh offline install; a user can still point the harness at a fork.
"""

from dataclasses import asdict, dataclass, field

from django.conf import settings

from harnesses import drivers

HARBOR_REPO = "harness-harbor"  # a served driver's name: the card's repo URL is served_url()
RUNNER_REPO = "belvedir-runner"
LM_EVAL_REPO = "https://github.com/Belvedir/harness-lm-eval"
# Both drivers are standard-library programs: nothing to install in an offline sandbox. The
# install step checks the settings and the tasks file before the run starts.
HARBOR_INSTALL = "python3 -m belvedir_harbor.run --check"
HARBOR_RUN = "python3 -m belvedir_harbor.run"
RUNNER_INSTALL = "python3 -m belvedir_runner --check"
RUNNER_RUN = "python3 -m belvedir_runner"

SUITES = "Suites"
RUNNERS = "Belvedir Runners"
SCAFFOLDS = "Agent scaffolds"
GPU_SERVED = "GPU-served"
GROUPS = [SUITES, RUNNERS, SCAFFOLDS, GPU_SERVED]


@dataclass(frozen=True)
class Preset:
    slug: str
    name: str
    group: str
    description: str
    repo: str  # a served driver's name, or a repo URL
    install_command: str
    run_command: str
    env: dict = field(default_factory=dict)
    ref: str = ""
    compute: str = "cpu"
    gpu_type: str = ""
    tasks: str = ""
    available: bool = True
    # An LLM-judged card: it prefills JUDGE_MODEL with the platform's default judge.
    judged: bool = False

    @property
    def repo_url(self) -> str:
        """The URL the card prefills: where the platform serves its driver, or the repo's URL."""
        return drivers.served_url(self.repo) if self.repo in drivers.DRIVERS else self.repo

    def prefilled_env(self) -> dict:
        """The env the card prefills: its own, and a judged card's JUDGE_MODEL the operator's
        default judge (BELVEDIR_DEFAULT_JUDGE_MODEL)."""
        if not self.judged:
            return dict(self.env)
        return {**self.env, "JUDGE_MODEL": settings.BELVEDIR_DEFAULT_JUDGE_MODEL}

    def as_dict(self) -> dict:
        values = asdict(self)
        del values["repo"], values["judged"]
        return {**values, "env": self.prefilled_env(), "repo_url": self.repo_url}


def _suite(slug: str, name: str, dataset: str, description: str) -> Preset:
    env = {"HARBOR_DATASET": dataset, "HARBOR_AGENT": "terminus-2", "HARBOR_N_TASKS": "5"}
    return Preset(slug, name, SUITES, description, HARBOR_REPO, HARBOR_INSTALL, HARBOR_RUN, env)


# An example in the tasks format (docs/tasks-format.md).
_TASKS_EXAMPLE = (
    '[\n  {"id": "refund-policy", "prompt": "A customer asks for a refund after 40 days. '
    'What do you answer?", "answer": "Refunds are possible within 30 days; after that we offer '
    'store credit.", "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy", '
    '"Offers store credit"]}}\n]\n'
)


def _scaffold(slug: str, name: str, agent: str, *, available: bool = True) -> Preset:
    # Every task of the user's list runs: HARBOR_N_TASKS is the suites' cap only. Judged: the
    # list's judge and rubric tasks (the example's too) are graded by the Runner's judge, whose
    # verifier needs JUDGE_MODEL and its key, as on Runner on Harbor.
    env = {"HARBOR_AGENT": agent}
    return Preset(
        slug,
        name,
        SCAFFOLDS,
        f"The {name} agent scaffold on your task list, run through Harbor.",
        HARBOR_REPO,
        HARBOR_INSTALL,
        HARBOR_RUN,
        env,
        tasks=_TASKS_EXAMPLE,
        available=available,
        judged=True,
    )


PRESETS: list[Preset] = [
    _suite(
        "swe-bench-verified",
        "SWE-bench Verified",
        "swebench-verified",
        "Real GitHub issues; the agent's patch must pass the repository's tests.",
    ),
    _suite(
        "terminal-bench-2-1",
        "Terminal-Bench 2.1",
        "terminal-bench@2.1",
        "Hard terminal tasks; several minutes each.",
    ),
    _suite("tau3-bench", "τ³-bench", "tau3-bench", "Tool-using customer-service conversations."),
    _suite("gaia", "GAIA", "gaia", "General assistant questions with tools and web."),
    _suite(
        "aider-polyglot",
        "Aider Polyglot",
        "aider-polyglot",
        "Exercism coding exercises in six languages.",
    ),
    Preset(
        "runner",
        "Belvedir Runner",
        RUNNERS,
        "Your task list in one sandbox, graded by an independent LLM judge.",
        RUNNER_REPO,
        RUNNER_INSTALL,
        RUNNER_RUN,
        tasks=_TASKS_EXAMPLE,
        judged=True,
    ),
    Preset(
        "harbor-runner",
        "Belvedir Runner on Harbor",
        RUNNERS,
        "Your task list, each task in its own container, graded by an independent LLM judge.",
        HARBOR_REPO,
        HARBOR_INSTALL,
        HARBOR_RUN,
        {"HARBOR_AGENT": "belvedir"},
        tasks=_TASKS_EXAMPLE,
        judged=True,
    ),
    _scaffold("openclaw", "OpenClaw", "openclaw"),
    _scaffold("opencode", "OpenCode", "opencode"),
    _scaffold("pi", "Pi", "pi"),
    _scaffold("hermes-agent", "Hermes Agent", "hermes-agent", available=False),
    _scaffold("prime-agent", "Prime Agent", "prime-agent", available=False),
    _scaffold("qm", "QM", "qm", available=False),
    _scaffold("mastra", "Mastra", "mastra", available=False),
    Preset(
        "lm-eval",
        "lm-eval (vLLM-served)",
        GPU_SERVED,
        "EleutherAI lm-evaluation-harness against a model served in the sandbox with vLLM.",
        LM_EVAL_REPO,
        "pip install -e .",
        "python -m belvedir_lm_eval",
        {"LM_EVAL_TASKS": "mmlu,gsm8k"},
        compute="gpu",
        gpu_type="A10G",
        available=False,
    ),
    Preset(
        "mt-bench",
        "MT-Bench (vLLM-served)",
        GPU_SERVED,
        "Multi-turn questions judged by an LLM, against a model served with vLLM.",
        LM_EVAL_REPO,
        "pip install -e .",
        "python -m belvedir_mt_bench",
        compute="gpu",
        gpu_type="A10G",
        available=False,
        judged=True,
    ),
]

_BY_SLUG = {p.slug: p for p in PRESETS}
JUDGED_CARDS = frozenset(p.slug for p in PRESETS if p.judged)


def preset_get(slug: str) -> Preset | None:
    return _BY_SLUG.get(slug)


def presets_by_group() -> list[tuple[str, list[Preset]]]:
    return [(g, [p for p in PRESETS if p.group == g]) for g in GROUPS]
