"""Where a media server may live: on this machine, nowhere else.

The narrator may run on the reader's LAN (a GPU box in the next room). A
media server may not: it is handed whole scenes of the story and portraits
of its characters, and it is typically a tool run with its web port open
(an image or voice server is seldom hardened the way an inference server
behind a login is). So a media endpoint passes the narrator's policy first
(`engine.providers.endpoints`: syntax, no public address, no cloud metadata
service) and must then resolve to loopback only.
"""
from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ..errors import MediaEndpointRefused
from ..providers import endpoints
from ..providers.endpoints import Resolver

__all__ = ["check_endpoint", "endpoint_rejection_reason"]


def _loopback_reason(host: str, addresses: list[str]) -> str | None:
    for address in addresses:
        ip = ipaddress.ip_address(address.strip("[]").split("%")[0])
        ip = getattr(ip, "ipv4_mapped", None) or ip
        if not ip.is_loopback:
            where = f"{host} resolves to {ip}" if host.strip("[]") != str(ip) else str(ip)
            return (f"a media provider endpoint must be on this machine (localhost, 127.0.0.1 or ::1), and {where} "
                    "is another machine on your network. The narrator may use a LAN server; media servers are "
                    "handed whole scenes of the story, so they must run here")
    return None


def endpoint_rejection_reason(url: str, resolver: Resolver | None = None) -> str | None:
    """None when a media provider may call `url`; otherwise why not, in words."""
    reason = endpoints.rejection_reason(url, resolver)
    if reason:
        return reason
    host = urlsplit(url).hostname or ""  # the policy above checked it reads the same to every parser
    try:
        addresses = [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        try:
            addresses = (resolver or endpoints.resolve)(host)
        except (OSError, UnicodeError) as exc:
            return f"the name {host!r} does not resolve ({exc})"
    return _loopback_reason(host, addresses)


def check_endpoint(url: str, resolver: Resolver | None = None) -> None:
    reason = endpoint_rejection_reason(url, resolver)
    if reason:
        raise MediaEndpointRefused(f"That media endpoint can't be used: {reason}.")
