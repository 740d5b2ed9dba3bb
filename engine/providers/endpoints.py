"""Which inference endpoints may be used: this machine and the reader's LAN.

The address is judged after the name is resolved, and again before every
request (the transport does it), so a hostname that starts resolving to a
public address, or a database edited by hand, cannot turn a local workbench
into a way to send the story off the machine. There is no setting to relax it.
"""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import httpx

__all__ = ["EndpointRefused", "PolicyTransport", "check", "rejection_reason"]

# Private and local ranges a reader's own inference box can live on.
_ALLOWED = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8", "::1/128",            # this machine
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # private LANs
        "100.64.0.0/10",                     # CGNAT: Tailscale and similar overlays
        "169.254.0.0/16", "fe80::/10",       # link-local
        "fc00::/7",                          # IPv6 unique-local
    )
]


class EndpointRefused(httpx.TransportError):
    """Raised by the transport: no connection is attempted."""


def _addresses(host: str) -> list[ipaddress._BaseAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def rejection_reason(url: str) -> str | None:
    """None when `url` may be used; otherwise why not, in words."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https"):
        return f"the address must start with http:// or https:// (got {url!r})"
    host = parts.hostname
    if not host:
        return f"there is no host in {url!r}"
    try:
        addresses = _addresses(host)
    except (socket.gaierror, UnicodeError) as exc:
        return f"the name {host!r} does not resolve ({exc})"
    public = [str(a) for a in addresses if not any(a in net for net in _ALLOWED)]
    if public:
        return (
            f"{host} resolves to {', '.join(public)}, which is not this machine or a private "
            "network. Only local and LAN inference servers are allowed"
        )
    return None


def check(url: str) -> None:
    reason = rejection_reason(url)
    if reason:
        raise EndpointRefused(f"That endpoint can't be used: {reason}.")


class PolicyTransport(httpx.BaseTransport):
    """Wraps the real transport; refuses a request before it leaves if its
    host is not local or private at the moment of sending."""

    def __init__(self, inner: httpx.BaseTransport | None = None):
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        check(str(request.url))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()
