"""Rerankers: a query and documents in, one relevance score per document out.

The `/rerank` shape that llama.cpp's server (`--reranking`), vLLM and
Text Embeddings Inference expose, on the reader's own machine or LAN, under
the narrator's endpoint policy (`endpoints.check`, `http.make_client`). Two
request bodies exist in the wild: Jina's, which llama.cpp and vLLM take
(`query`, `documents`, `top_n`; answer `{"results": [{"index",
"relevance_score"}]}`), and TEI's (`query`, `texts`; answer `[{"index",
"score"}]`). The first is sent; a server that refuses it as malformed gets
the second once, and the shape that worked is remembered. Either answer is
read, in any order, by index.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import httpx

from ..errors import NarratorError
from .endpoints import EndpointRefused, check
from .http import make_client

__all__ = ["RERANK_TIMEOUT", "Reranker", "ServerReranker", "read_scores"]

# A cross-encoder reads every (query, document) pair: 80 candidates of up to
# 800 tokens on a CPU server take seconds, so a turn's call may be slow, but
# never unbounded.
RERANK_TIMEOUT = 60.0
_JINA, _TEI = "jina", "tei"


@runtime_checkable
class Reranker(Protocol):
    model_id: str

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in the documents' order (higher: more relevant)."""
        ...


def read_scores(body, n: int) -> list[float]:
    """Scores by index from either answer shape; refused in words otherwise."""
    rows = body.get("results", body.get("data")) if isinstance(body, dict) else body
    if not isinstance(rows, list):
        raise ValueError("no list of results")
    scores: list[float | None] = [None] * n
    for row in rows:
        index = int(row["index"])
        value = row.get("relevance_score", row.get("score"))
        if not 0 <= index < n or value is None:
            raise ValueError(f"result {row!r} names no document of the {n} sent")
        scores[index] = float(value)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise ValueError(f"no score for document(s) {missing[:5]}")
    return [float(s) for s in scores]


class ServerReranker:
    """`POST {base_url}/rerank` on a local or LAN server."""

    def __init__(self, base_url: str, model: str, *, client: httpx.Client | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = self.model_id = model
        self.client = client or make_client(RERANK_TIMEOUT)
        self.shape = _JINA

    def _body(self, query: str, documents: list[str]) -> dict:
        if self.shape == _TEI:
            return {"query": query, "texts": documents, "raw_scores": False}
        return {"model": self.model, "query": query, "documents": documents, "top_n": len(documents)}

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        docs = list(documents)
        if not docs:
            return []
        url = f"{self.base_url}/rerank"
        try:
            check(url)
            reply = self.client.post(url, json=self._body(query, docs))
            if reply.status_code in (400, 422) and self.shape == _JINA:  # TEI's body, once
                self.shape = _TEI
                reply = self.client.post(url, json=self._body(query, docs))
                if reply.status_code in (400, 422):
                    self.shape = _JINA
            reply.raise_for_status()
            return read_scores(reply.json(), len(docs))
        except (httpx.HTTPError, EndpointRefused) as exc:
            from .openai import friendly_error

            raise friendly_error(exc, self.base_url, self.model, RERANK_TIMEOUT) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise NarratorError(f"The rerank endpoint {url} answered in an unexpected shape ({exc}).") from exc
