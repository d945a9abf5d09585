"""Public ids: a short prefix and random base32, never raw primary keys."""

import secrets

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def make_id(prefix: str, length: int = 20) -> str:
    return f"{prefix}_" + "".join(secrets.choice(_ALPHABET) for _ in range(length))


# Module-level callables so migrations can reference them.
def org_id() -> str:
    return make_id("org")


def project_id() -> str:
    return make_id("prj")


def key_id() -> str:
    return make_id("key")


def harness_id() -> str:
    return make_id("har")


def run_id() -> str:
    return make_id("run")


def session_id() -> str:
    return make_id("ses")


def task_id() -> str:
    return make_id("tsk")


def task_group_id() -> str:
    return make_id("grp")


def member_id() -> str:
    return make_id("mem")


def invitation_id() -> str:
    return make_id("inv")


def environment_id() -> str:
    return make_id("env")


def generation_id() -> str:
    return make_id("gen")


def task_sandbox_id() -> str:
    return make_id("tsb")
