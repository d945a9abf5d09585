"""What one Harbor trial recorded (its trial directory's result.json, as Harbor 0.26 writes
it): its reward, the exceptions it recorded, and whether its reward stands or it errored."""

from __future__ import annotations

import json
from pathlib import Path


def reward(trial: dict) -> float | None:
    rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
    value = rewards.get("reward")
    if value is None and len(rewards) == 1:
        value = next(iter(rewards.values()))
    return float(value) if isinstance(value, int | float) else None


def exceptions(trial: dict) -> list[dict]:
    """The trial's recorded exceptions, the trial's own first (Harbor's recorded_exceptions)."""
    found = [trial.get("exception_info")]
    found += [step.get("exception_info") for step in trial.get("step_results") or []]
    return [e for e in found if isinstance(e, dict)]


def described(failure: dict) -> str:
    kind = failure.get("exception_type", "Error")
    return f"{kind}: {failure.get('exception_message', '')}".strip().rstrip(":")[:1000]


def errored(trial: dict, reward: float | None) -> str | None:
    """Why the trial has no valid reward (it errored: its environment did not build or start,
    its verifier crashed...), or None when its reward stands.

    Harbor 0.26 says so itself (TrialResult.reward_valid, from its error policy: an agent
    timeout keeps its reward, a build failure or a verifier crash does not); a result without
    that field counts as errored when it has no reward."""
    valid = trial.get("reward_valid")
    if valid is None:
        valid = reward is not None and all(
            (e.get("policy") or {}).get("has_valid_reward", True) for e in exceptions(trial)
        )
    if valid and reward is not None:
        return None
    failures = exceptions(trial)
    return described(failures[0]) if failures else "the trial recorded no reward"


def started(path: Path) -> tuple[str, str]:
    trial = json.loads(path.read_text())
    return (str(trial.get("started_at") or ""), path.parent.name)
