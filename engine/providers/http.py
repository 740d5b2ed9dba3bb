"""The one way the workbench makes an HTTP client: local and LAN hosts only,
bounded answers.

Every client is `PolicyTransport` around `PinnedTransport`: the URL is judged
before the request leaves, the socket is opened only to an address the
policy approved (see `endpoints.PinnedBackend`), and every answer is read
through a byte limit that applies after decompression, so neither a
gigabyte-long line nor a gzip bomb can fill the notebook's memory. Tests
pass their own inner transport or talk to a real loopback server through
the same path.

Redirects are never followed (httpx does not by default, and no client here
asks it to): the address a redirect names was never judged by the policy,
and following it would carry the request, story included, wherever a
server points. A redirect is refused in words instead (`RedirectRefused`),
naming the address it pointed to, rather than read as an empty answer.
"""
from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator

import httpcore
import httpx

from .endpoints import EndpointRefused, PinnedBackend, Resolver, rejection_reason, syntax_reason

__all__ = ["CONNECT_TIMEOUT", "MAX_BODY", "PROBE_BODY", "PinnedTransport", "PolicyTransport", "RedirectRefused",
           "ResponseRefused", "bounded", "bounded_timeout", "make_client", "read_json"]

CONNECT_TIMEOUT = 1.5
MIN_TIMEOUT, MAX_TIMEOUT = 30.0, 3600.0
# The largest answer any endpoint call may return, after decompression. The
# biggest legitimate ones: a 4,096-token reasoning stream (about 1.3 MB of
# SSE at ~300 bytes a chunk) and a 32-text batch of 4,096-dim embeddings
# (about 2.6 MB of JSON). A 10 MB gzip bomb unpacked to +2 GB before this.
MAX_BODY = 16 * 1024 * 1024
# Probes (/api/ps, /api/show, /props, /models, /tokenize) answer in kilobytes;
# Ollama's /api/show with a long licence text is about 40 KB.
PROBE_BODY = 4 * 1024 * 1024
_INFLATE_STEP = 64 * 1024
_INFLATABLE = {"gzip": 31, "x-gzip": 31, "deflate": 15}
_REDIRECTS = {301: "moved permanently", 302: "found elsewhere", 303: "see other", 307: "temporary redirect",
              308: "permanent redirect"}
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


class ResponseRefused(httpx.TransportError):
    """The server's answer broke a size or format bound; reading stopped."""


class RedirectRefused(ResponseRefused):
    """The server answered with a redirect, which the workbench does not follow."""


def redirect_refusal(response: httpx.Response, url: str) -> RedirectRefused:
    """Words for a redirect: the status, where it pointed, why it is not followed."""
    status = response.status_code
    location = _UNPRINTABLE.sub("", response.headers.get("location", ""))[:300]
    if location:
        try:
            location = str(httpx.URL(url).join(location))
        except (httpx.InvalidURL, ValueError):
            pass  # shown as the server wrote it
    where = f"to {location}" if location else "without saying where (no Location header)"
    return RedirectRefused(
        f"{url} answered HTTP {status} ({_REDIRECTS.get(status, 'a redirect')}), a redirect {where}. The workbench "
        "does not follow redirects: the address a redirect names was never checked against the endpoint policy "
        "(local and LAN hosts only), and following it would send the request, and the story in it, there. If "
        "your server now lives at that address, configure the endpoint with it yourself.")


def bounded_timeout(seconds: float) -> float:
    """Read timeouts live in 30..3600 s: shorter fails a cold model load,
    longer hides a dead server for over an hour."""
    return min(max(float(seconds), MIN_TIMEOUT), MAX_TIMEOUT)


def _inflate(decoder, raw: bytes) -> Iterator[bytes]:
    """Decompress in steps of 64 KB, so a bomb is stopped one step past the limit."""
    pending = raw
    while True:
        out = decoder.decompress(pending, _INFLATE_STEP)
        pending = decoder.unconsumed_tail
        if out:
            yield out
        if not pending and len(out) < _INFLATE_STEP:
            return


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, coding: str, limit: int, url: str):
        self.inner, self.coding, self.limit, self.url = inner, coding, limit, url

    def __iter__(self) -> Iterator[bytes]:
        decoder = zlib.decompressobj(_INFLATABLE[self.coding]) if self.coding in _INFLATABLE else None
        total = 0
        for raw in self.inner:
            for piece in self._decoded(decoder, raw):  # lazily: one 64 KB step of a bomb at a time
                total += len(piece)
                if total > self.limit:
                    raise ResponseRefused(f"The server at {self.url} sent more than {self.limit // 1024:,} KB in "
                                          "one answer, far beyond anything a model server sends; reading stopped.")
                yield piece

    def _decoded(self, decoder, raw: bytes) -> Iterator[bytes]:
        if decoder is None:
            yield raw
            return
        try:
            yield from _inflate(decoder, raw)
        except zlib.error as exc:
            raise ResponseRefused(f"The server at {self.url} sent a compressed answer that does not "
                                  f"decompress ({exc}).") from exc

    def close(self) -> None:
        self.inner.close()


def bounded(response: httpx.Response, request: httpx.Request, limit: int = MAX_BODY) -> httpx.Response:
    """The same response, its body decompressed here under `limit` bytes."""
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    url = f"{request.url.scheme}://{request.url.netloc.decode()}"
    if coding not in ("", "identity", *_INFLATABLE):
        response.close()
        raise ResponseRefused(f"The server at {url} compressed its answer with {coding!r}, which the workbench "
                              "did not ask for and does not read.")
    headers = [(k, v) for k, v in response.headers.multi_items()
               if k.lower() not in ("content-encoding", "content-length")]
    stream = _BoundedStream(response.stream, coding, limit, url)  # type: ignore[arg-type]
    return httpx.Response(response.status_code, headers=headers, stream=stream,
                          extensions=response.extensions)


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport, with its connection pool built on the pinned
    network backend. httpx does not expose `network_backend`, so the pool is
    rebuilt here; environment proxies are ignored on purpose (a proxy would
    be the address connected to, and would see the whole story)."""

    def __init__(self, resolver: Resolver | None = None):
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(trust_env=False),
                                             network_backend=PinnedBackend(resolver))


class PolicyTransport(httpx.BaseTransport):
    """Refuses a request whose URL is not allowed before it leaves, and reads
    every answer under the byte bound. Around the workbench's own pinned
    transport the address is judged at connect time (no second lookup);
    around any other transport (tests, a caller's own) the name is resolved
    and judged here."""

    def __init__(self, inner: httpx.BaseTransport | None = None, *, resolver: Resolver | None = None,
                 limit: int = MAX_BODY):
        self.pinned = inner is None
        self.inner = PinnedTransport(resolver) if inner is None else inner
        self.limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        reason = syntax_reason(url) if self.pinned else rejection_reason(url)
        if reason:
            raise EndpointRefused(f"That endpoint can't be used: {reason}.", request=request)
        response = self.inner.handle_request(request)
        if response.status_code in _REDIRECTS:
            refusal = redirect_refusal(response, url)
            response.close()
            raise refusal
        return bounded(response, request, self.limit)

    def close(self) -> None:
        self.inner.close()


def make_client(timeout: float = 300.0, transport: httpx.BaseTransport | None = None, *,
                resolver: Resolver | None = None, max_body: int = MAX_BODY) -> httpx.Client:
    """A client that can only reach approved addresses and only read bounded answers.

    `transport` replaces the network (tests); `resolver` replaces DNS for the
    pinned connection (tests of rebinding). Compression is declined up front
    (`Accept-Encoding: identity`); a server that compresses anyway is still
    read under the bound."""
    return httpx.Client(
        transport=PolicyTransport(transport, resolver=resolver, limit=max_body),
        timeout=httpx.Timeout(bounded_timeout(timeout), connect=CONNECT_TIMEOUT),
        headers={"Accept-Encoding": "identity"},
        trust_env=False,
    )


def read_json(client: httpx.Client, method: str, url: str, *, limit: int = PROBE_BODY, **kwargs):
    """(status, parsed JSON or None) for a small answer, read under `limit` bytes."""
    with client.stream(method, url, **kwargs) as response:
        body = b"".join(_capped(response, limit, url))
        status = response.status_code
    try:
        return status, json.loads(body) if body else None
    except ValueError:
        return status, None


def _capped(response: httpx.Response, limit: int, url: str) -> Iterator[bytes]:
    total = 0
    for piece in response.iter_bytes():
        total += len(piece)
        if total > limit:
            raise ResponseRefused(f"{url} answered with more than {limit // 1024:,} KB where a few KB were "
                                  "expected; reading stopped.")
        yield piece
