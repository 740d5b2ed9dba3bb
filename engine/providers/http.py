"""The one way the workbench makes an HTTP client: local and LAN hosts only.

Every client is built on `PolicyTransport`, which re-checks the host before
each request leaves; tests pass their own inner transport or talk to a real
loopback server through the same path.
"""
from __future__ import annotations

import httpx

from .endpoints import PolicyTransport

__all__ = ["CONNECT_TIMEOUT", "bounded_timeout", "make_client"]

CONNECT_TIMEOUT = 1.5
MIN_TIMEOUT, MAX_TIMEOUT = 30.0, 3600.0


def bounded_timeout(seconds: float) -> float:
    """Read timeouts live in 30..3600 s: shorter fails a cold model load,
    longer hides a dead server for over an hour."""
    return min(max(float(seconds), MIN_TIMEOUT), MAX_TIMEOUT)


def make_client(timeout: float = 300.0, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    return httpx.Client(
        transport=PolicyTransport(transport),
        timeout=httpx.Timeout(bounded_timeout(timeout), connect=CONNECT_TIMEOUT),
    )
