"""Where a run's call goes and with which key: its upstream target.

A covered call goes to the operator's upstream with the operator's key, against the run's
spend cap. An own-key call (the run was launched with the user's own MODEL_API_KEY or
JUDGE_API_KEY and the proxy on: `Run.model_proxied`, `Run.judge_proxied`) goes to the base
the user gave or the launch inferred (`Run.model_api_base_resolved`), with the user's key,
decrypted here and nowhere else; it is not charged to the organization (it bills to the
user's provider). The user's base is connected to through `router.pinned` (the model-host
policy on every connection, no redirects).

Every endpoint forwards through a target: `target.url(path)`, `target.headers()`,
`target.client()`.
"""

import dataclasses

import httpx
from django.conf import settings

from belvedir import crypto
from router import pinned, upstream
from runs.contract import run_harness_env
from runs.models import Run


@dataclasses.dataclass(frozen=True)
class Target:
    base: str
    key: str = dataclasses.field(repr=False)
    # True: the operator's upstream, charged against the run's cap; False: the user's base
    # and key, billed to the user's provider.
    covered: bool = True

    def url(self, path: str) -> str:
        return f"{self.base.rstrip('/')}/{path.lstrip('/')}"

    def headers(self, **extra: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.key}",
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            **extra,
        }

    def client(self) -> httpx.AsyncClient:
        """This event loop's shared client for the target (served by ASGI)."""
        return upstream.client() if self.covered else pinned.client()

    def new_client(self) -> httpx.AsyncClient:
        """A client of its own (a request served by WSGI, whose event loop ends with it)."""
        return upstream.new_client() if self.covered else pinned.new_client()


def covered_target() -> Target:
    return Target(
        base=settings.BELVEDIR_ROUTER_UPSTREAM_BASE, key=settings.BELVEDIR_ROUTER_UPSTREAM_KEY
    )


def _names(run: Run) -> dict[str, str]:
    """The run's model and judge, as its sandbox was given them (the launch's, else the
    harness env's)."""
    env = {}
    if not run.judge_model and run.judge_proxied:
        env = run_harness_env(run)
    return {
        "MODEL": (run.model_base or run.model).strip(),
        "JUDGE": (run.judge_model or str(env.get("JUDGE_MODEL") or "")).strip(),
    }


def own_key_models(run: Run) -> list[str]:
    """The run's models its own keys call through the router (its model, its judge)."""
    names = _names(run) if run.model_proxied or run.judge_proxied else {}
    proxied = {"MODEL": run.model_proxied, "JUDGE": run.judge_proxied}
    return [name for prefix, name in names.items() if proxied[prefix] and name]


def own_prefix(run: Run, model: str) -> str | None:
    """Which of the run's own-key settings ("MODEL" or "JUDGE") a call of `model` goes
    through; None for a covered call. A model of the run's own goes through its own settings;
    any other model through the run's own-key model settings, else its own-key judge's (the
    user's provider, the user's key, as a harness given the raw key could call it), else it
    is a covered call (which the router refuses for a model not the run's)."""
    proxied = {"MODEL": run.model_proxied, "JUDGE": run.judge_proxied}
    if not any(proxied.values()):
        return None
    names = _names(run)
    for prefix in ("MODEL", "JUDGE"):
        if proxied[prefix] and model == names[prefix]:
            return prefix
    covered = {"MODEL": run.model_covered, "JUDGE": run.judge_covered}
    if any(covered[prefix] and model == names[prefix] for prefix in names):
        return None
    return "MODEL" if proxied["MODEL"] else "JUDGE"


def own_target(run: Run, prefix: str) -> Target:
    """The user's base and key for the run's `prefix` ("MODEL" or "JUDGE") settings: the
    key given at launch, else the harness env's."""
    if prefix == "MODEL":
        base, encrypted = run.model_api_base_resolved, run.model_api_key_encrypted
    else:
        base, encrypted = run.judge_api_base_resolved, run.judge_api_key_encrypted
    key = crypto.decrypt(encrypted) or str(run_harness_env(run).get(f"{prefix}_API_KEY") or "")
    return Target(base=base, key=key.strip(), covered=False)
