"""The sandbox network and its firewall rules as the project's scripts install them.

No traffic goes anywhere here: these read the installed rules and Docker's view of the
network, and run the installers (which re-apply the same rules atomically).
"""

import json
import os
import subprocess
import uuid
from pathlib import Path

import docker
import pytest

from sandboxes import network
from sandboxes.network import NetworkConfig, NetworkSetupError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = NetworkConfig()


def iptables(*args: str) -> list[str]:
    done = subprocess.run(["iptables", *args], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def leading_hooks(rules: list[str]) -> list[str]:
    """The sandbox networks' hooks at the head of a chain (before any other rule): ours, and
    another sandbox network's (a second engine's, tests/runs/test_two_engines.py) if any."""
    hooks = []
    for rule in rules[1:]:  # [0] is the chain's policy or -N
        if "--comment belvedir-sandbox" not in rule:
            break
        hooks.append(rule)
    return hooks


def test_forwarded_traffic_from_sandboxes_to_link_local_addresses_is_dropped_by_rule():
    forward = iptables("-S", network.FWD_CHAIN)
    hooks = iptables("-S", "DOCKER-USER")

    assert (
        "-A BELVEDIR-SANDBOX-FWD -d 169.254.0.0/16 -m comment --comment belvedir-sandbox -j DROP"
        in forward
    )
    assert (
        "-A DOCKER-USER -i br-belvedir -m comment --comment belvedir-sandbox "
        "-j BELVEDIR-SANDBOX-FWD"
    ) in leading_hooks(hooks)


def test_forwarded_traffic_from_sandboxes_to_private_and_cgnat_networks_is_dropped_by_rule():
    forward = iptables("-S", network.FWD_CHAIN)

    for cidr in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"]:
        rule = f"-A BELVEDIR-SANDBOX-FWD -d {cidr} -m comment --comment belvedir-sandbox -j DROP"
        assert rule in forward
    accepted = [rule for rule in forward if rule.endswith("-j ACCEPT")]
    # Only DNS to the host's nameservers is let through, before the drops.
    assert accepted == [
        f"-A BELVEDIR-SANDBOX-FWD -d {server}/32 -p {proto} -m {proto} --dport 53 "
        "-m comment --comment belvedir-sandbox -j ACCEPT"
        for server in network.host_resolvers()
        for proto in ("udp", "tcp")
    ]
    assert forward[1 : 1 + len(accepted)] == accepted


def test_operator_allowed_networks_are_accepted_before_the_private_drops():
    config = NetworkConfig(allow_cidrs=("10.20.0.0/16", "192.168.5.7"), dns_servers=("10.9.9.9",))
    forward = network.chain_rules(config)[network.FWD_CHAIN]
    tag = "-m comment --comment belvedir-sandbox"

    assert forward[:5] == [
        f"-A BELVEDIR-SANDBOX-FWD -d 10.9.9.9/32 -p udp -m udp --dport 53 {tag} -j ACCEPT",
        f"-A BELVEDIR-SANDBOX-FWD -d 10.9.9.9/32 -p tcp -m tcp --dport 53 {tag} -j ACCEPT",
        f"-A BELVEDIR-SANDBOX-FWD -d 10.20.0.0/16 {tag} -j ACCEPT",
        f"-A BELVEDIR-SANDBOX-FWD -d 192.168.5.7/32 {tag} -j ACCEPT",
        f"-A BELVEDIR-SANDBOX-FWD -d 169.254.0.0/16 {tag} -j DROP",
    ]
    assert f"-A BELVEDIR-SANDBOX-FWD -d 10.0.0.0/8 {tag} -j DROP" in forward
    env = {"BELVEDIR_SANDBOX_ALLOW_CIDRS": " 10.20.0.0/16, ,192.168.5.7"}
    assert NetworkConfig.from_env(env).allow_cidrs == ("10.20.0.0/16", "192.168.5.7")


def test_no_egress_forwards_nothing_but_the_allowed_networks_not_even_dns():
    """BELVEDIR_SANDBOX_EGRESS=none (an offline host): the allowed networks, then everything
    else from the bridge rejected, the host's nameservers too; the gateway's ports (INPUT) as
    ever. A live sandbox on such a network: tests/helpers/offline_network.py's check."""
    config = NetworkConfig(allow_cidrs=("10.20.0.0/16",), dns_servers=("10.9.9.9",), egress="none")
    tag = "-m comment --comment belvedir-sandbox"
    assert network.chain_rules(config)[network.FWD_CHAIN] == [
        f"-A BELVEDIR-SANDBOX-FWD -d 10.20.0.0/16 {tag} -j ACCEPT",
        f"-A BELVEDIR-SANDBOX-FWD {tag} -j REJECT --reject-with icmp-port-unreachable",
    ]
    assert (
        network.chain_rules(config)[network.IN_CHAIN]
        == (network.chain_rules(CONFIG)[network.IN_CHAIN])
    )
    assert NetworkConfig.from_env({"BELVEDIR_SANDBOX_EGRESS": "none"}).egress == "none"
    assert NetworkConfig.from_env({}).egress == "internet"


def test_a_second_sandbox_network_has_chains_of_its_own():
    second = NetworkConfig(
        name="belvedir-sandbox2", subnet="172.31.0.0/24", gateway="172.31.0.1", bridge="br-b2"
    )

    assert CONFIG.chains() == (network.IN_CHAIN, network.FWD_CHAIN)  # the default's, as ever
    assert second.chains() == ("BVD-IN-br-b2", "BVD-FWD-br-b2")
    assert set(network.chain_rules(second)).isdisjoint(network.chain_rules(CONFIG))
    assert [rule for _, _, rule in network.hook_rules(second)][:2] == [
        "-i br-b2 -m comment --comment belvedir-sandbox -j BVD-IN-br-b2",
        "-i br-b2 -m comment --comment belvedir-sandbox -j BVD-FWD-br-b2",
    ]


def test_the_host_resolvers_are_read_from_resolv_conf_without_loopback_ones(tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# x\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver ::1\n")

    assert network.host_resolvers(str(conf)) == ("10.255.255.53",)


def test_traffic_from_sandboxes_to_other_bridges_is_dropped_and_the_internet_is_not():
    forward = iptables("-S", network.FWD_CHAIN)

    assert (
        "-A BELVEDIR-SANDBOX-FWD -o br-+ -m comment --comment belvedir-sandbox -j DROP" in forward
    )
    assert (
        "-A BELVEDIR-SANDBOX-FWD -o docker0 -m comment --comment belvedir-sandbox -j DROP"
        in forward
    )
    assert forward[-1] == "-A BELVEDIR-SANDBOX-FWD -m comment --comment belvedir-sandbox -j RETURN"


def test_traffic_from_sandboxes_to_the_host_is_dropped_but_for_the_gateway_ports():
    inbound = iptables("-S", network.IN_CHAIN)
    first_input_rules = leading_hooks(iptables("-S", "INPUT"))

    assert (
        "-A INPUT -i br-belvedir -m comment --comment belvedir-sandbox -j BELVEDIR-SANDBOX-IN"
    ) in first_input_rules
    assert inbound[1:] == [
        "-A BELVEDIR-SANDBOX-IN -m conntrack --ctstate RELATED,ESTABLISHED "
        "-m comment --comment belvedir-sandbox -j ACCEPT",
        "-A BELVEDIR-SANDBOX-IN -d 172.30.0.1/32 -p tcp -m tcp --dport 18700:18799 "
        "-m comment --comment belvedir-sandbox -j ACCEPT",
        "-A BELVEDIR-SANDBOX-IN -m comment --comment belvedir-sandbox -j DROP",
    ]


@pytest.mark.docker
def test_the_sandbox_network_keeps_containers_apart_and_has_its_own_bridge():
    client = docker.from_env()
    try:
        attrs = client.networks.get("belvedir-sandbox").attrs
    finally:
        client.close()

    assert attrs["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    assert attrs["Options"]["com.docker.network.bridge.name"] == "br-belvedir"
    assert attrs["IPAM"]["Config"] == [{"Subnet": "172.30.0.0/24", "Gateway": "172.30.0.1"}]
    assert network.problems(CONFIG) == []


@pytest.mark.docker
def test_a_network_that_lets_containers_talk_is_reported():
    client = docker.from_env()
    name = f"belvedir-test-icc-{uuid.uuid4().hex[:8]}"
    made = client.networks.create(name, driver="bridge")
    try:
        found = network.network_problems(NetworkConfig(name=name), network.inspect_network(name))
    finally:
        made.remove()
        client.close()

    assert f"the Docker network {name} lets containers talk to each other (icc on)" in found
    assert f"the Docker network {name} does not use the bridge br-belvedir" in found


@pytest.mark.docker
def test_installing_twice_changes_nothing():
    before = iptables("-S")
    for _ in range(2):
        done = subprocess.run(
            ["bash", "scripts/sandbox-network.sh"], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "belvedir-sandbox is isolated" in done.stdout
        assert "added" not in done.stdout

    assert iptables("-S") == before
    dns_rules = 2 * len(network.host_resolvers())
    # Another sandbox network's rules (a second engine's, in its own BVD-* chains) aside.
    ours = [rule for rule in before if "belvedir-sandbox" in rule and "BVD-" not in rule]
    assert len(ours) == 13 + dns_rules


@pytest.mark.docker
def test_the_check_reports_what_is_missing_without_changing_anything():
    env = {**os.environ, "BELVEDIR_SANDBOX_NETWORK": "belvedir-test-absent"}
    done = subprocess.run(
        ["bash", "scripts/sandbox-network.sh", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )

    assert done.returncode == 1
    assert "the Docker network belvedir-test-absent does not exist" in done.stderr


@pytest.mark.parametrize(
    "values, message",
    [
        ({"name": "host"}, "must name a network of our own"),
        ({"name": "bridge"}, "must name a network of our own"),
        ({"ports": "1-2"}, "must be a port or a range"),
        ({"ports": "18799:18700"}, "must be a port or a range"),
        ({"gateway": "10.0.0.1"}, "is not in the subnet"),
        ({"bridge": "a-bridge-name-too-long"}, "is not an interface name"),
        ({"allow_cidrs": ("10.0.0.0/33",)}, "must list IPv4 networks"),
        ({"egress": "off"}, "BELVEDIR_SANDBOX_EGRESS must be internet or none"),
    ],
)
def test_a_bad_network_setting_is_refused_by_name(values, message):
    with pytest.raises(NetworkSetupError, match=message):
        NetworkConfig(**values).validated()


# scripts/gvisor.sh: Debian 13's runsc (Debian 12's breaks `ls` in every sandbox).
PINNED_RUNSC = "/usr/local/lib/belvedir/gvisor/0.0-20240729.0-4+b7/runsc"


@pytest.mark.docker
def test_ensure_docker_registers_gvisors_runtimes_by_merging_into_an_existing_daemon_json(tmp_path):
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text(
        json.dumps({"log-level": "warn", "runtimes": {"kata": {"path": "/usr/bin/kata"}}})
    )
    env = {**os.environ, "DOCKER_DAEMON_JSON": str(daemon_json)}

    first = subprocess.run(
        ["bash", "scripts/ensure-docker.sh"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    written = daemon_json.read_text()
    second = subprocess.run(
        ["bash", "scripts/ensure-docker.sh"], cwd=ROOT, capture_output=True, text=True, env=env
    )

    assert first.returncode == 0, first.stderr
    assert f"registered runsc in {daemon_json}" in first.stdout
    assert f"registered runsc-gpu in {daemon_json}" in first.stdout
    runsc_args = ["--platform=ptrace", "--network=host", "--overlay2=none"]
    assert json.loads(written) == {
        "log-level": "warn",
        "runtimes": {
            "kata": {"path": "/usr/bin/kata"},
            "runsc": {"path": PINNED_RUNSC, "runtimeArgs": runsc_args},
            # GPU sandboxes' (BELVEDIR_GPU_RUNTIME's default): the same, with gVisor's nvproxy
            "runsc-gpu": {"path": PINNED_RUNSC, "runtimeArgs": [*runsc_args, "--nvproxy=true"]},
        },
    }
    assert second.returncode == 0, second.stderr
    assert "registered" not in second.stdout
    assert daemon_json.read_text() == written


def runtimes_after_merge(daemon_json: Path, runsc: str) -> tuple[list[str], dict]:
    """scripts/runsc-runtimes.py merge, as ensure-docker.sh runs it: the names it registered
    and the runtimes daemon.json then holds."""
    done = subprocess.run(
        ["python3", "scripts/runsc-runtimes.py", "merge", str(daemon_json), runsc],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split(), json.loads(daemon_json.read_text())["runtimes"]


def test_the_gpu_runtime_follows_runsc_to_a_new_release_but_an_operators_own_is_kept(tmp_path):
    daemon_json = tmp_path / "daemon.json"
    assert runtimes_after_merge(daemon_json, "/opt/old/runsc")[0] == ["runsc", "runsc-gpu"]
    changed, found = runtimes_after_merge(daemon_json, "/opt/new/runsc")  # a new pinned release
    assert changed == ["runsc", "runsc-gpu"]
    assert found["runsc-gpu"]["path"] == "/opt/new/runsc"
    assert found["runsc-gpu"]["runtimeArgs"][-1] == "--nvproxy=true"

    # An operator's (a runsc that knows the host's driver, an ABI forced): theirs, kept whole.
    theirs = {"path": "/opt/gvisor-2025/runsc", "runtimeArgs": ["--nvproxy", "--nvproxy-driver-version=550.54.15"]}  # fmt: skip
    found["runsc-gpu"] = theirs
    daemon_json.write_text(json.dumps({"runtimes": found}))
    changed, found = runtimes_after_merge(daemon_json, "/opt/newer/runsc")
    assert changed == ["runsc"]
    assert found["runsc-gpu"] == theirs


def test_the_merge_keeps_daemon_jsons_mode_owner_and_symlink_and_leaves_no_temp_file(tmp_path):
    """Config management often links /etc/docker/daemon.json and keeps it 0600: the merge
    writes the link's target with its mode (a fresh review's E2)."""
    target = tmp_path / "managed" / "daemon.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"log-level": "warn"}))
    target.chmod(0o600)
    link = tmp_path / "daemon.json"
    link.symlink_to(target)

    changed, found = runtimes_after_merge(link, "/opt/gvisor/runsc")

    assert changed == ["runsc", "runsc-gpu"] and found["runsc"]["path"] == "/opt/gvisor/runsc"
    assert link.is_symlink() and link.resolve() == target
    assert json.loads(target.read_text())["log-level"] == "warn"
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["daemon.json"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("[]", "a JSON list, not an object"),
        ('{"runtimes": null, "x": 1}', None),
        ('{"runtimes": {"runc": "x"}}', '"runtimes" must be an object of objects'),
        ("{not json", "is not valid JSON"),
    ],
)
def test_a_daemon_json_the_merge_cannot_read_is_named_and_left_as_it_was(
    tmp_path, content, message
):
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text(content)
    done = subprocess.run(
        ["python3", "scripts/runsc-runtimes.py", "merge", str(daemon_json), "/opt/g/runsc"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if message is None:  # "runtimes": null is an empty registry: merged into
        assert done.returncode == 0, done.stderr
        assert json.loads(daemon_json.read_text())["x"] == 1
        return
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
    assert daemon_json.read_text() == content
