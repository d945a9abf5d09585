"""A sandbox network as an offline host has it: `BELVEDIR_SANDBOX_EGRESS=none`.

On a host with no route out, a sandbox reaches the platform (the sandbox gateway on its network's
gateway IP) and nothing else: no registry, no DNS answer. This machine's sandboxes reach the
internet (through a TLS-intercepting proxy), so a test that must see the offline behaviour gets
a sandbox network of its own, made exactly as `scripts/sandbox-network.sh` makes the default one
(`sandboxes.network.install`: the Docker bridge network, its own chains and hooks), with
egress off: every packet forwarded from its bridge is rejected at once, DNS to the host's
resolvers too. Nothing of the shared default network or its rules changes, and nothing leaves
the host. Module-scoped (a network and iptables chains per test module), removed afterwards
with whatever containers are still attached to it. Registered for the whole suite in
tests/conftest.py (`pytest_plugins`).
"""

import random
import secrets

import docker
import pytest

from sandboxes import network
from sandboxes.network import NetworkConfig, NetworkSetupError


def offline_config() -> NetworkConfig:
    """A network of our own: a random name and bridge, a free-looking 172.29.x.0/24."""
    tag = secrets.token_hex(2)
    third = random.randint(0, 255)
    return NetworkConfig(
        name=f"belvedir-offline-{tag}",
        subnet=f"172.29.{third}.0/24",
        gateway=f"172.29.{third}.1",
        bridge=f"br-bvoff{tag}",
        egress="none",
    ).validated()


def _remove(config: NetworkConfig) -> None:
    client = docker.from_env()
    try:
        for container in client.containers.list(all=True, filters={"network": config.name}):
            container.remove(force=True)
        try:
            client.networks.get(config.name).remove()
        except docker.errors.NotFound:
            pass
    finally:
        client.close()
    network.uninstall_rules(config, say=lambda _text: None)


@pytest.fixture(scope="module")
def offline_network():
    """The NetworkConfig of an installed egress-off sandbox network (see the module)."""
    failures = []
    for _ in range(5):
        config = offline_config()
        try:
            network.install(config, say=lambda _text: None)
            break
        except NetworkSetupError as exc:  # a subnet some other network took: another one
            failures.append(str(exc))
            _remove(config)
    else:
        pytest.fail(f"no offline sandbox network could be made: {failures}")
    try:
        yield config
    finally:
        _remove(config)


def network_settings(config: NetworkConfig) -> dict[str, str]:
    """The platform's settings (and a worker's environment) for sandboxes on `config`."""
    return {
        "BELVEDIR_SANDBOX_NETWORK": config.name,
        "BELVEDIR_SANDBOX_SUBNET": config.subnet,
        "BELVEDIR_SANDBOX_GATEWAY": config.gateway,
        "BELVEDIR_SANDBOX_BRIDGE": config.bridge,
        "BELVEDIR_SANDBOX_EGRESS": config.egress,
    }
