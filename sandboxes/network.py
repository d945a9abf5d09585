"""The isolated sandbox network: one Docker bridge network and the firewall rules around it.

Sandboxes join the bridge network `belvedir-sandbox` (inter-container traffic off, its own
bridge interface `br-belvedir`). Around it, iptables rules tagged `belvedir-sandbox`:

- INPUT from the bridge (anything addressed to the host itself, on any of its addresses):
  replies to connections the host opened, and TCP to the gateway IP on the sandbox-facing
  port range (where the platform's sandbox gateway listens); everything else is dropped,
  so PostgreSQL, Redis, the Docker API, SSH or whatever else listens on the host is out of
  reach;
- DOCKER-USER (forwarded traffic) from the bridge: link-local addresses (169.254.0.0/16,
  cloud metadata), private networks (10/8, 172.16/12, 192.168/16) and carrier-grade NAT
  (100.64/10) and every Docker bridge (other sandboxes, other containers) are dropped; the
  internet (NAT out) stays reachable. An operator may let sandboxes reach chosen private
  networks (an internal package mirror): BELVEDIR_SANDBOX_ALLOW_CIDRS, accepted before the
  drops. DNS keeps working: sandboxes ask the host's nameservers (/etc/resolv.conf)
  straight, from a resolv.conf of their own (`sandboxes.dockerhost`; Docker's embedded
  resolver at 127.0.0.11 would answer the other sandboxes' names, and forwards to the same
  servers from the container's namespace), so DNS (port 53) to exactly those nameservers is
  accepted before the drops (this machine's resolver is on a private address);
- with BELVEDIR_SANDBOX_EGRESS=none (an offline or air-gapped host, or an operator who wants
  sandboxes to reach nothing but the platform), forwarded traffic from the bridge is refused
  altogether after BELVEDIR_SANDBOX_ALLOW_CIDRS: no internet and no DNS, each attempt rejected
  at once (a connection refused, a name that does not resolve) as on a host without a route
  out; the gateway IP's port range (INPUT) stays open, so runs still reach the platform;
- IPv6 from the bridge is dropped altogether (the network has no IPv6).

Pure Python and the `docker`/`iptables` commands, no Django: `scripts/sandbox-network.sh`
runs `python3 sandboxes/network.py install` before the venv exists, and the platform
calls `problems()` to refuse launches while the isolation is not in place.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TAG = "belvedir-sandbox"
IN_CHAIN = "BELVEDIR-SANDBOX-IN"  # the default network's chains (bridge br-belvedir)
FWD_CHAIN = "BELVEDIR-SANDBOX-FWD"
DEFAULT_BRIDGE = "br-belvedir"
LINK_LOCAL = "169.254.0.0/16"
# Private (RFC 1918) and carrier-grade NAT networks: the platform's and its neighbours'.
PRIVATE_NETWORKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
RESERVED_NETWORKS = {"host", "bridge", "none", "default"}
# BELVEDIR_SANDBOX_EGRESS: the internet (NAT out, the default), or nothing past the platform.
EGRESS_CHOICES = ("internet", "none")
_TIMEOUT = 20


def host_resolvers(path: str = "/etc/resolv.conf") -> tuple[str, ...]:
    """The host's IPv4 nameservers (not loopback ones): what sandboxes ask (their resolv.conf),
    and where Docker's embedded DNS forwards to."""
    found: list[str] = []
    try:
        with open(path, encoding="utf-8") as file:  # read for every sandbox: closed at once
            lines = file.read().splitlines()
    except OSError:
        return ()
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                address = ipaddress.IPv4Address(parts[1])
            except ValueError:
                continue
            if not address.is_loopback and str(address) not in found:
                found.append(str(address))
    return tuple(found)


class NetworkSetupError(Exception):
    """The sandbox network or its rules could not be installed; the message says why."""


@dataclass(frozen=True)
class NetworkConfig:
    """Where sandboxes live: the Docker network, its bridge, subnet, gateway and ports."""

    name: str = "belvedir-sandbox"
    subnet: str = "172.30.0.0/24"
    gateway: str = "172.30.0.1"
    bridge: str = DEFAULT_BRIDGE
    ports: str = "18700:18799"
    allow_cidrs: tuple[str, ...] = ()  # forwarded traffic accepted before the drops
    dns_servers: tuple[str, ...] = field(default_factory=host_resolvers)  # port 53 accepted
    egress: str = "internet"  # or "none": nothing forwarded but allow_cidrs (EGRESS)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NetworkConfig:
        """From BELVEDIR_SANDBOX_{NETWORK,SUBNET,GATEWAY,BRIDGE,PORTS,ALLOW_CIDRS,EGRESS}
        (defaults above; ALLOW_CIDRS comma-separated)."""
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            name=env.get("BELVEDIR_SANDBOX_NETWORK") or defaults.name,
            subnet=env.get("BELVEDIR_SANDBOX_SUBNET") or defaults.subnet,
            gateway=env.get("BELVEDIR_SANDBOX_GATEWAY") or defaults.gateway,
            bridge=env.get("BELVEDIR_SANDBOX_BRIDGE") or defaults.bridge,
            ports=env.get("BELVEDIR_SANDBOX_PORTS") or defaults.ports,
            allow_cidrs=split_cidrs(env.get("BELVEDIR_SANDBOX_ALLOW_CIDRS") or ""),
            egress=env.get("BELVEDIR_SANDBOX_EGRESS") or defaults.egress,
        ).validated()

    def validated(self) -> NetworkConfig:
        """Itself, or NetworkSetupError naming the bad value."""
        if self.name in RESERVED_NETWORKS or not re.match(r"^[A-Za-z0-9][\w.-]{0,62}$", self.name):
            raise NetworkSetupError(
                f"BELVEDIR_SANDBOX_NETWORK must name a network of our own, not {self.name!r}"
            )
        if not re.match(r"^[A-Za-z0-9_-]{1,15}$", self.bridge):
            raise NetworkSetupError(
                f"BELVEDIR_SANDBOX_BRIDGE {self.bridge!r} is not an interface name"
            )
        try:
            subnet = ipaddress.IPv4Network(self.subnet)
            gateway = ipaddress.IPv4Address(self.gateway)
        except ValueError as exc:
            raise NetworkSetupError(f"bad sandbox subnet or gateway: {exc}") from None
        if gateway not in subnet:
            raise NetworkSetupError(f"the gateway {gateway} is not in the subnet {subnet}")
        if self.egress not in EGRESS_CHOICES:
            raise NetworkSetupError(
                f"BELVEDIR_SANDBOX_EGRESS must be {' or '.join(EGRESS_CHOICES)}, not {self.egress!r}"
            )
        self.port_range()
        self.allowed_networks()
        return self

    def allowed_networks(self) -> list[str]:
        """BELVEDIR_SANDBOX_ALLOW_CIDRS as iptables prints them (`10.1.0.0/16`, `10.1.2.3/32`)."""
        try:
            return [str(ipaddress.IPv4Network(cidr, strict=False)) for cidr in self.allow_cidrs]
        except ValueError as exc:
            raise NetworkSetupError(
                f"BELVEDIR_SANDBOX_ALLOW_CIDRS must list IPv4 networks: {exc}"
            ) from None

    def port_range(self) -> tuple[int, int]:
        match = re.match(r"^(\d+)(?::(\d+))?$", self.ports)
        low, high = (
            (int(match.group(1)), int(match.group(2) or match.group(1))) if match else (0, 0)
        )
        if not 1 <= low <= high <= 65535:
            raise NetworkSetupError(
                f"BELVEDIR_SANDBOX_PORTS must be a port or a range like 18700:18799, not {self.ports!r}"
            )
        return low, high

    def chains(self) -> tuple[str, str]:
        """Our (INPUT, forward) chains. Each bridge has its own, so a second sandbox network on
        the same host (another engine's: BELVEDIR_SANDBOX_BRIDGE) never replaces the first's
        rules; the default bridge keeps the chain names it always had."""
        if self.bridge == DEFAULT_BRIDGE:
            return IN_CHAIN, FWD_CHAIN
        return f"BVD-IN-{self.bridge}", f"BVD-FWD-{self.bridge}"

    def gateway_url(self) -> str:
        """The URL sandboxes use to reach a gateway on the first port of the range."""
        return f"http://{self.gateway}:{self.port_range()[0]}"


def split_cidrs(text: str) -> tuple[str, ...]:
    """A comma-separated list of networks as a tuple, blanks dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _tag() -> str:
    return f"-m comment --comment {TAG}"


def chain_rules(config: NetworkConfig) -> dict[str, list[str]]:
    """Our own chains' rules, exactly as `iptables -S <chain>` prints them."""
    low, high = config.port_range()
    ports = f"{low}:{high}" if high != low else str(low)
    inbound, forward = config.chains()
    return {
        inbound: [
            f"-A {inbound} -m conntrack --ctstate RELATED,ESTABLISHED {_tag()} -j ACCEPT",
            f"-A {inbound} -d {config.gateway}/32 -p tcp -m tcp --dport {ports} {_tag()} -j ACCEPT",
            f"-A {inbound} {_tag()} -j DROP",
        ],
        forward: _offline_rules(config, forward)
        if config.egress == "none"
        else [
            *(
                f"-A {forward} -d {server}/32 -p {proto} -m {proto} --dport 53 {_tag()} -j ACCEPT"
                for server in config.dns_servers
                for proto in ("udp", "tcp")
            ),
            *(f"-A {forward} -d {cidr} {_tag()} -j ACCEPT" for cidr in config.allowed_networks()),
            f"-A {forward} -d {LINK_LOCAL} {_tag()} -j DROP",
            *(f"-A {forward} -d {cidr} {_tag()} -j DROP" for cidr in PRIVATE_NETWORKS),
            f"-A {forward} -o br-+ {_tag()} -j DROP",
            f"-A {forward} -o docker0 {_tag()} -j DROP",
            f"-A {forward} {_tag()} -j RETURN",
        ],
    }


def _offline_rules(config: NetworkConfig, forward: str) -> list[str]:
    """BELVEDIR_SANDBOX_EGRESS=none: the allowed networks, then every other forwarded packet
    rejected (no DNS either), so a connection fails at once instead of timing out."""
    return [
        *(f"-A {forward} -d {cidr} {_tag()} -j ACCEPT" for cidr in config.allowed_networks()),
        f"-A {forward} {_tag()} -j REJECT --reject-with icmp-port-unreachable",
    ]


def hook_rules(config: NetworkConfig) -> list[tuple[str, str, str]]:
    """(command, chain, rule) of the rules that send the bridge's traffic into our chains."""
    bridge = f"-i {config.bridge} {_tag()}"
    inbound, forward = config.chains()
    return [
        ("iptables", "INPUT", f"{bridge} -j {inbound}"),
        ("iptables", "DOCKER-USER", f"{bridge} -j {forward}"),
        ("ip6tables", "INPUT", f"{bridge} -j DROP"),
        ("ip6tables", "FORWARD", f"{bridge} -j DROP"),
    ]


def _run(args: list[str], *, stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
    except FileNotFoundError:
        return subprocess.CompletedProcess(args, 127, "", f"{args[0]} is not installed")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"{args[0]} took over {_TIMEOUT} s")


def _error(done: subprocess.CompletedProcess) -> str:
    return (done.stderr or done.stdout or "failed").strip().splitlines()[-1][:300]


def _ipv6_firewall() -> bool:
    """Whether this host filters IPv6 at all (no IPv6, no rules needed)."""
    return (
        os.path.exists("/proc/net/if_inet6") and _run(["ip6tables", "-S", "INPUT"]).returncode == 0
    )


# --- checking ------------------------------------------------------------------------------


def network_problems(config: NetworkConfig, inspect: dict | None) -> list[str]:
    """What is wrong with the Docker network as `docker network inspect` describes it."""
    if inspect is None:
        return [f"the Docker network {config.name} does not exist"]
    options = inspect.get("Options") or {}
    found = []
    if inspect.get("Driver") != "bridge":
        found.append(f"the Docker network {config.name} is not a bridge network")
    if options.get("com.docker.network.bridge.enable_icc") != "false":
        found.append(
            f"the Docker network {config.name} lets containers talk to each other (icc on)"
        )
    if options.get("com.docker.network.bridge.name") != config.bridge:
        found.append(f"the Docker network {config.name} does not use the bridge {config.bridge}")
    ipam = [
        (c.get("Subnet"), c.get("Gateway")) for c in (inspect.get("IPAM") or {}).get("Config") or []
    ]
    if ipam != [(config.subnet, config.gateway)]:
        found.append(
            f"the Docker network {config.name} has subnet/gateway {ipam}, "
            f"not {config.subnet} via {config.gateway}"
        )
    if inspect.get("Internal"):
        found.append(f"the Docker network {config.name} is internal (no internet)")
    return found


def inspect_network(name: str) -> dict | None:
    """`docker network inspect`, or None when there is no such network."""
    done = _run(["docker", "network", "inspect", name])
    if done.returncode != 0:
        if "No such network" in done.stderr or "not found" in done.stderr:
            return None
        raise NetworkSetupError(f"could not inspect the Docker network {name}: {_error(done)}")
    return json.loads(done.stdout)[0]


def rule_problems(config: NetworkConfig) -> list[str]:
    """Which of our firewall rules are missing from the live ruleset."""
    found = []
    for chain, wanted in chain_rules(config).items():
        done = _run(["iptables", "-S", chain])
        if done.returncode != 0:
            found.append(f"the firewall chain {chain} is missing ({_error(done)})")
            continue
        live = done.stdout.splitlines()
        missing = [rule for rule in wanted if rule not in live]
        if missing or [r for r in live if r.startswith("-A")] != wanted:
            found.append(f"the firewall chain {chain} does not hold the belvedir-sandbox rules")
    ipv6 = _ipv6_firewall()
    for command, chain, rule in hook_rules(config):
        if command == "ip6tables" and not ipv6:
            continue
        if _run([command, "-C", chain, *rule.split()]).returncode != 0:
            found.append(f"the {command} rule '-A {chain} {rule}' is missing")
    return found


def problems(config: NetworkConfig) -> list[str]:
    """Everything that keeps sandboxes from being isolated; empty when all is in place."""
    try:
        found = network_problems(config, inspect_network(config.name))
    except NetworkSetupError as exc:
        return [str(exc)]
    return found + rule_problems(config)


# --- installing ----------------------------------------------------------------------------


def ensure_network(config: NetworkConfig, say: Callable[[str], None]) -> None:
    """Create the Docker network, or check the one there; a wrong one is recreated if empty."""
    current = inspect_network(config.name)
    if current is not None:
        wrong = network_problems(config, current)
        if not wrong:
            return
        if current.get("Containers"):
            raise NetworkSetupError(
                f"{'; '.join(wrong)}, and containers are attached to it: remove them and run "
                "scripts/sandbox-network.sh again"
            )
        say(f"recreating {config.name}: {'; '.join(wrong)}")
        done = _run(["docker", "network", "rm", config.name])
        if done.returncode != 0:
            raise NetworkSetupError(f"could not remove {config.name}: {_error(done)}")
    done = _run(
        ["docker", "network", "create", "--driver", "bridge"]
        + ["--subnet", config.subnet, "--gateway", config.gateway]
        + ["-o", f"com.docker.network.bridge.name={config.bridge}"]
        + ["-o", "com.docker.network.bridge.enable_icc=false"]
        + ["-o", "com.docker.network.bridge.enable_ip_masquerade=true"]
        + ["--label", "belvedir.managed=1", config.name]
    )
    if done.returncode != 0:
        raise NetworkSetupError(
            f"could not create the Docker network {config.name}: {_error(done)}"
        )
    say(f"created the Docker network {config.name} ({config.subnet}, bridge {config.bridge})")


def ensure_rules(config: NetworkConfig, say: Callable[[str], None]) -> None:
    """Load our chains in one atomic iptables-restore, then hook them in where missing."""
    lines = ["*filter", *(f":{chain} - [0:0]" for chain in chain_rules(config))]
    for rules in chain_rules(config).values():
        lines += rules
    lines.append("COMMIT")
    done = _run(["iptables-restore", "--noflush"], stdin="\n".join(lines) + "\n")
    if done.returncode != 0:
        raise NetworkSetupError(f"could not load the sandbox firewall rules: {_error(done)}")
    ipv6 = _ipv6_firewall()
    for command, chain, rule in hook_rules(config):
        if command == "ip6tables" and not ipv6:
            continue
        if _run([command, "-C", chain, *rule.split()]).returncode == 0:
            continue
        if chain == "DOCKER-USER" and _run([command, "-S", chain]).returncode != 0:
            _run([command, "-N", chain])  # dockerd makes it too; whoever is first
            _run([command, "-A", "FORWARD", "-j", chain])
        done = _run([command, "-I", chain, "1", *rule.split()])
        if done.returncode != 0:
            raise NetworkSetupError(f"could not add '{command} -I {chain} {rule}': {_error(done)}")
        say(f"added {command} -I {chain} {rule}")


def install(config: NetworkConfig, say: Callable[[str], None] = print) -> None:
    """Make the sandbox network and its rules be there (idempotent); raise if it cannot."""
    if os.geteuid() != 0:
        raise NetworkSetupError("installing the sandbox network needs root (iptables)")
    ensure_network(config, say)
    ensure_rules(config, say)
    left = problems(config)
    if left:
        raise NetworkSetupError("; ".join(left))


def uninstall_rules(config: NetworkConfig, say: Callable[[str], None] = print) -> None:
    """Take the bridge's hooks and chains out of the firewall (a second engine's network that
    is going away: scripts/second-engine.sh stop); the Docker network stays."""
    for command, chain, rule in hook_rules(config):
        while _run([command, "-C", chain, *rule.split()]).returncode == 0:
            _run([command, "-D", chain, *rule.split()])
            say(f"removed {command} -A {chain} {rule}")
    for chain in config.chains():
        if _run(["iptables", "-S", chain]).returncode == 0:
            _run(["iptables", "-F", chain])
            _run(["iptables", "-X", chain])
            say(f"removed the chain {chain}")


def main(argv: list[str]) -> int:
    """`network.py install` (default), `check` or `uninstall`; exit 1 with the reasons."""
    action = argv[0] if argv else "install"
    if action not in ("install", "check", "uninstall"):
        print("usage: network.py [install|check|uninstall]", file=sys.stderr)
        return 2
    try:
        config = NetworkConfig.from_env()
        if action == "uninstall":
            uninstall_rules(config, say=lambda text: print(f"sandbox-network: {text}"))
            return 0
        if action == "install":
            install(config, say=lambda text: print(f"sandbox-network: {text}"))
        left = problems(config)
    except NetworkSetupError as exc:
        print(f"sandbox-network: ERROR: {exc}", file=sys.stderr)
        return 1
    for reason in left:
        print(f"sandbox-network: {reason}", file=sys.stderr)
    if not left:
        print(
            f"sandbox-network: {config.name} is isolated (gateway {config.gateway}, TCP {config.ports})"
        )
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
