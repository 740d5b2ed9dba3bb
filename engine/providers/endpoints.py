"""Which inference endpoints may be used: this machine and the reader's LAN.

The address is judged after the name is resolved, and the connection is then
made to the very address that was judged (`PinnedBackend`): a name that
answers the check with a LAN address and the connection with a public one
(DNS rebinding) never gets a socket. There is no setting to relax it.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

import httpcore
import httpx

__all__ = ["EndpointRefused", "PinnedBackend", "Resolver", "address_reason", "check", "rejection_reason",
           "resolve", "syntax_reason"]

# Private and local ranges a reader's own inference box can live on.
_ALLOWED = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8", "::1/128",            # this machine
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # private LANs
        "100.64.0.0/10",                     # CGNAT: Tailscale and similar overlays
        "169.254.0.0/16", "fe80::/10",       # link-local: a laptop cabled straight to a GPU box
        "fc00::/7",                          # IPv6 unique-local
    )
]
# Cloud instance-metadata and credential services. They sit inside the ranges
# above (link-local, CGNAT, unique-local), answer any process on the machine,
# and hand out credentials: never a model server.
_METADATA = {
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, DigitalOcean, OpenStack
        "169.254.169.253",  # AWS DNS resolver
        "169.254.169.123",  # AWS time sync
        "169.254.170.2",    # AWS ECS task credentials
        "169.254.170.23",   # AWS EKS pod identity
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",    # AWS IPv6 metadata
        "fd00:ec2::23",     # AWS EKS pod identity, IPv6
        "fd00:ec2::123",    # AWS time sync, IPv6
    )
}

Resolver = Callable[[str], list[str]]


class EndpointRefused(httpx.TransportError):
    """Raised before a socket opens: the address is not allowed."""


def resolve(host: str) -> list[str]:
    """Every address the system resolver gives for `host` (the one DNS seam;
    tests replace it or pass their own resolver to `PinnedBackend`)."""
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return [info[4][0].split("%")[0] for info in infos]


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text.strip("[]").split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:169.254.169.254 is 169.254.169.254
    return mapped or address


def _clause(ip) -> str | None:
    if ip in _METADATA:
        return "a cloud metadata service (it hands out the machine's credentials), never a model server"
    if not any(ip in net for net in _ALLOWED):
        return "not this machine or a private network. Only local and LAN inference servers are allowed"
    return None


def address_reason(address: str) -> str | None:
    """None when a socket may be opened to `address`; otherwise why not."""
    ip = _ip(address)
    clause = _clause(ip)
    return f"{ip} is {clause}" if clause else None


def _addresses(host: str, resolver: Resolver) -> list[str]:
    try:
        return [str(_ip(host))]
    except ValueError:
        return resolver(host)


def syntax_reason(url: str) -> str | None:
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https"):
        return f"the address must start with http:// or https:// (got {url!r})"
    if not parts.hostname:
        return f"there is no host in {url!r}"
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        return (f"{url!r} is not an address the HTTP client can use ({exc}); write the host as plain "
                "digits and dots, e.g. 127.0.0.1, or as a name")
    if not parsed.host.isascii() or parsed.host != parts.hostname.lower().strip("[]"):
        return (f"the host in {url!r} is read differently by different parts of the system; "
                "write it in plain ASCII digits and dots or as a name")
    return None


def _judge(host: str, addresses: list[str]) -> str | None:
    """Every address must pass: one public answer among private ones is enough to refuse."""
    if not addresses:
        return f"the name {host!r} resolves to no address"
    for address in addresses:
        ip = _ip(address)
        clause = _clause(ip)
        if clause:
            return f"{ip} is {clause}" if _same(address, host) else f"{host} resolves to {ip}, which is {clause}"
    return None


def _same(address: str, host: str) -> bool:
    try:
        return _ip(address) == _ip(host)
    except ValueError:
        return False


def rejection_reason(url: str, resolver: Resolver | None = None) -> str | None:
    """None when `url` may be used; otherwise why not, in words."""
    reason = syntax_reason(url)
    if reason:
        return reason
    host = httpx.URL(url).host
    try:
        addresses = _addresses(host, resolver or resolve)
    except (OSError, UnicodeError) as exc:
        return f"the name {host!r} does not resolve ({exc})"
    return _judge(host, addresses)


def check(url: str) -> None:
    reason = rejection_reason(url)
    if reason:
        raise EndpointRefused(f"That endpoint can't be used: {reason}.")


class PinnedBackend(httpcore.SyncBackend):
    """Resolves the host once per connection, judges every address, and
    connects to an approved address itself. httpcore still sends the URL's
    host in the Host header and as the TLS server name, so virtual hosts and
    certificates work as before; only the socket's target is fixed."""

    def __init__(self, resolver: Resolver | None = None):
        self.resolver = resolver

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            addresses = _addresses(host, self.resolver or resolve)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"the name {host!r} does not resolve ({exc})") from exc
        why = _judge(host, addresses)
        if why:
            raise EndpointRefused(f"That endpoint can't be used: {why}.")
        last: Exception | None = None
        for address in addresses:
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        raise last  # type: ignore[misc]
