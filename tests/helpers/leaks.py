"""Which test left something of the host behind: after each test, the mounts under this
session's temporary folder (a quota volume left mounted in a test's tmp_path) and, after a
`docker` test, the containers of this session's platform instance, that were not there
before it. Reported at the end of the session, by test; nothing is removed here: the test
that leaked mends its own clean-up.

Registered for the whole suite in tests/conftest.py (`pytest_plugins`). Cheap: one read of
/proc/self/mounts a test, one container listing a `docker` test.
"""

import docker
import pytest
import requests

from sandboxes.base import LABEL_INSTANCE

_left: list[tuple[str, list[str]]] = []


def _mounts_under(root: str) -> set[str]:
    with open("/proc/self/mounts") as f:
        points = {line.split()[1].replace("\\040", " ") for line in f if line.strip()}
    return {p for p in points if p.startswith(root)}


def _containers(instance: str = "") -> dict[str, str]:
    """The platforms' containers on the local engine (`instance`'s alone when given): id ->
    name; none if it does not answer."""
    try:
        client = docker.from_env(timeout=10)
    except docker.errors.DockerException:
        return {}
    label = f"{LABEL_INSTANCE}={instance}" if instance else LABEL_INSTANCE
    try:
        listed = client.api.containers(all=True, filters={"label": label})
        return {item["Id"]: (item.get("Names") or ["?"])[0] for item in listed}
    except (docker.errors.DockerException, requests.RequestException):
        return {}
    finally:
        client.close()


def _instance() -> str:
    from belvedir.sandbox_config import instance_id

    return instance_id()


@pytest.fixture(autouse=True)
def _nothing_left_behind(request, tmp_path_factory):
    """Autouse, so set up first and torn down last: after every other fixture's clean-up."""
    root = f"{tmp_path_factory.getbasetemp()}/"
    docker_test = request.node.get_closest_marker("docker") is not None
    mounts = _mounts_under(root)
    before = _containers() if docker_test else {}
    yield
    left = [f"mount {p}" for p in sorted(_mounts_under(root) - mounts)]
    if docker_test:  # the session's instance is the test database's, known by now
        now = _containers(_instance())
        left += [f"container {name} ({cid[:12]})" for cid, name in now.items() if cid not in before]
    if left:
        _left.append((request.node.nodeid, left))


def pytest_terminal_summary(terminalreporter):
    if not _left:
        return
    terminalreporter.section("left behind (tests/helpers/leaks.py)")
    for nodeid, left in _left:
        terminalreporter.write_line(f"{nodeid}: {', '.join(left)}")
