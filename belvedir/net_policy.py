"""Which hosts the platform's own side may connect to for a user: the internal-address policy
of repo hosts (`harnesses.policy`) and of model bases (the router forwards a run's calls to
the base its user named, with the user's key).

An address is internal when it is loopback, unspecified, link-local, multicast, CGNAT,
site-local or private: the platform would reach its own network (a metadata service, the
database, the sandbox gateway). A model base is refused too when it is the platform itself
(the host and port of BELVEDIR_BASE_URL or BELVEDIR_SANDBOX_BASE_URL, by name or address).
Both policies are off under BELVEDIR_DEV=1; an operator lets internal hosts through by name,
address or CIDR (BELVEDIR_REPO_HOST_ALLOWLIST, BELVEDIR_MODEL_HOST_ALLOWLIST).

A model base is checked at launch (`model_base_refusal`) and again on every connection the
platform opens to it (`belvedir.pinned`: the router's own-key calls, environment generation's):
the name is resolved once there, the addresses checked and the connection made to a checked
address, so a name that answers otherwise the second time (DNS rebinding) reaches nothing it
was not checked for.
"""

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[Address]]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HostUnresolved(Exception):
    """The host's name does not resolve."""


def address_refusal(address: Address) -> str | None:
    """What kind of internal address this is (loopback, private, ...), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one (mapped, or 6to4's 2002::/16, which a host with
        # a 6to4 tunnel routes to it) is judged as that IPv4 address.
        address = address.ipv4_mapped or address.sixtofour or address
    kinds = [
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("carrier-grade NAT", address.version == 4 and address in _CGNAT),
        ("site-local", address.version == 6 and address.is_site_local),
        ("private", address.is_private or address.is_reserved),
    ]
    return next((kind for kind, matched in kinds if matched), None)


def internal_host_refusal(host: str, addresses: Iterable[Address]) -> str | None:
    """ "the host … is a … address" for the first of the host's addresses that is internal."""
    for address in addresses:
        kind = address_refusal(address)
        if kind:
            shown = host if host == str(address) else f"{host} ({address})"
            return f"the host {shown} is a {kind} address"
    return None


def host_allowed(host: str, addresses: Iterable[Address], entries: Iterable[str]) -> bool:
    """Whether an allow-list names the host, or holds every one of its addresses."""
    addresses = list(addresses)
    for entry in entries:
        if entry.lower() == host.lower():
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if addresses and all(address in network for address in addresses):
            return True
    return False


def resolve(host: str, port: int) -> list[Address]:
    """The host's addresses (a literal address is its own); HostUnresolved when none."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise HostUnresolved(f"the host {host} does not resolve") from exc
    found: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in found:
            found.append(address)
    return found


def _host_port(url: str) -> tuple[str, int] | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.scheme not in _DEFAULT_PORTS:
        return None
    return parts.hostname, port or _DEFAULT_PORTS[parts.scheme]


def _own_endpoints() -> list[tuple[str, int]]:
    urls = (settings.BELVEDIR_BASE_URL, settings.BELVEDIR_SANDBOX_BASE_URL)
    return [found for found in map(_host_port, urls) if found is not None]


def model_host_refusal(
    host: str, port: int, addresses: list[Address], *, resolver: Resolver = resolve
) -> str | None:
    """Why the router may not connect to `host`:`port` at these (just resolved) addresses,
    or None: an internal address not allow-listed, or the platform's own host and port."""
    if settings.BELVEDIR_DEV:
        return None
    for own_host, own_port in _own_endpoints():
        if own_port != port:
            continue
        if own_host.lower() == host.lower():
            return f"the host {host}:{port} is this platform itself"
        try:
            own = resolver(own_host, own_port)
        except HostUnresolved:
            continue
        if set(own) & set(addresses):
            return f"the host {host}:{port} is this platform itself"
    if host_allowed(host, addresses, settings.BELVEDIR_MODEL_HOST_ALLOWLIST):
        return None
    return internal_host_refusal(host, addresses)


def model_base_refusal(url: str, *, resolver: Resolver = resolve) -> str | None:
    """Why a run's calls may not be forwarded to the model base `url`, or None (checked at
    launch; each connection is checked again, `belvedir.pinned`). A name that does not
    resolve is refused too: the router could forward nothing to it."""
    found = _host_port(url)
    if found is None:
        return "it must be an http(s) URL with a host"
    if settings.BELVEDIR_DEV:
        return None
    host, port = found
    try:
        addresses = resolver(host, port)
    except HostUnresolved as exc:
        return str(exc)
    refusal = model_host_refusal(host, port, addresses, resolver=resolver)
    return None if refusal is None else f"{refusal}; model bases must be on the public internet"
