"""The second stage: a stronger relevance model scores the first stage's candidates again.

The first stage (FTS5/bm25 re-scored by rarity, and MiniLM's cosine) is
cheap and finds the right passage among its few dozen candidates for most
scenes, but cannot order them: MiniLM put a relevant passage first for 22
of 58 held-out scenes, all-mpnet-base-v2 re-scoring the same candidates for
39 (issue 25). So the candidates of both paths are scored again by the
second model, and admission (its own measured floor, from the same registry
as the first model's) and order use that score.

One seam, three backends:
- `VectorStage` over an embedder: all-mpnet-base-v2 embedded on the CPU, or
  a server's `/v1/embeddings`. Passage vectors are computed ahead of play
  (`stage_vectors`); a turn embeds only its query.
- `RerankStage` over a server's `/rerank` (llama.cpp `--reranking`, vLLM,
  TEI): the query and the candidates' text in, scores out, per turn.
- none: first stage only, said in the report and the library status.

When the second stage cannot judge a turn (vectors still being computed for
some candidate, no calibrated floor, the model failed), the turn uses the
first stage alone and the report says why: two models' scores are never
mixed in one ranking.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from . import stage_vectors
from .calibration import calibrated_models, floor_for
from .vectors import unit

__all__ = ["KINDS", "STAGE_CANDIDATES", "STAGE_PARTS", "RerankStage", "Rescored", "VectorStage", "relevance", "rescore", "stage_for",
           "start_background", "uncalibrated_stage_note"]

KINDS = ("auto", "embedded", "endpoint", "rerank", "off")
# Candidates the second model judges: each path's best this many (the
# lexical path's after its rarity re-sort, the semantic path's by cosine),
# so at most twice this many per turn. Chosen on the tuning half of the
# retrieval evaluation (notebooks/retrieval_eval.ipynb, "Second-stage
# constants"; evidence/retrieval_eval.json): at the calibrated floor, 5 per
# path found 33 of 54 tuning scenes at 4,096 and 10 per path 32, with no
# everyday scene admitting either way (more candidates, more near misses).
STAGE_CANDIDATES = 5
# The query parts (paragraphs, newest first; see query.query_parts) the
# second model reads. A one-line scene is one part; in play the reader's line
# and the state come first. Each part is one more query to embed (mpnet: tens
# of milliseconds on an idle 2-core machine) or one more rerank call, inside a
# turn's 150 ms: a cost bound, not a measured optimum (the evaluation's scenes
# in play were not re-run with other values).
STAGE_PARTS = 2


@dataclass
class Rescored:
    """The second stage's verdict on one turn's candidates."""

    model: str = ""
    floor: float | None = None
    used: bool = False
    note: str = ""
    scores: dict[int, float] = field(default_factory=dict)  # passage id -> score
    ready: int = 0  # candidates that had what the model needs
    candidates: int = 0


class VectorStage:
    """An embedder whose passage vectors are stored ahead of play."""

    needs_vectors = True

    def __init__(self, embedder, *, background: bool = False):
        self.embedder = embedder
        self.model_id = embedder.model_id
        self.background = background

    def score(self, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]], out: Rescored) -> None:
        """Cosine of each candidate's stored vector with the best query part."""
        vectors = stage_vectors.vectors_for(session, self.model_id, [h for _, h, _ in candidates])
        out.ready = sum(h in vectors for _, h, _ in candidates)
        if out.ready < len(candidates):
            done, total = stage_vectors.coverage(session, _campaign_of(session, candidates), self.model_id)
            out.note = (f"The second stage ({self.model_id}) is still computing passage vectors ({done} of "
                        f"{total} passages ready); this turn used the first stage alone.")
            return
        query = unit(self.embedder.embed(list(parts)))
        matrix = np.stack([vectors[h] for _, h, _ in candidates])
        best = np.max(np.einsum("ij,kj->ik", matrix, query), axis=1)
        out.scores = {pid: float(s) for (pid, _, _), s in zip(candidates, best, strict=True)}
        out.used = True


class RerankStage:
    """A server's `/rerank`: the candidates' text is sent every turn."""

    needs_vectors = False
    background = False

    def __init__(self, reranker):
        self.reranker = reranker
        self.model_id = reranker.model_id

    def score(self, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]], out: Rescored) -> None:
        texts = [line for _, _, line in candidates]
        out.ready = len(candidates)
        best = np.max([self.reranker.rerank(p, texts) for p in parts], axis=0)
        out.scores = {pid: float(s) for (pid, _, _), s in zip(candidates, best, strict=True)}
        out.used = True


def _campaign_of(session, candidates) -> int:
    from ..store.knowledge_tables import KnowledgePassageRow

    row = session.get(KnowledgePassageRow, candidates[0][0])
    return row.campaign_id if row is not None else 0


def uncalibrated_stage_note(model_id: str) -> str:
    """Why a configured second stage does not judge, in words."""
    return (f"The second stage “{model_id}” has no measured floor here, so it does not judge: the first stage "
            f"alone admits and orders. Models with a measured floor: {', '.join(calibrated_models())}. "
            "Measure one with notebooks/calibrate.ipynb.")


def rescore(stage, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]]) -> Rescored:
    """Score `candidates` ((passage id, content hash, embedded line)) for the
    scene's `parts`. Never raises: a failure is a note, and the turn keeps
    the first stage."""
    out = Rescored(model=stage.model_id, floor=floor_for(stage.model_id), candidates=len(candidates))
    if out.floor is None:
        out.note = uncalibrated_stage_note(stage.model_id)
        return out
    if not candidates or not parts:
        out.note = "The first stage found no candidates for the second to judge."
        return out
    try:
        stage.score(session, list(parts)[:STAGE_PARTS], candidates, out)
    except Exception as exc:  # a model or server failure narrows the turn to the first stage
        out.used, out.scores = False, {}
        out.note = (f"The second stage ({stage.model_id}) failed this turn ({type(exc).__name__}: {exc}); "
                    "the first stage was used alone.")
    return out


def relevance(stage, query_parts: Sequence[str], texts: Sequence[str]) -> list[float]:
    """The second model's score of each text for a query, with nothing
    stored: for a caller with a handful of texts (memory recall's
    candidates). A VectorStage embeds the texts here, so keep them few."""
    parts = [p for p in query_parts if p and p.strip()][:STAGE_PARTS]
    if not texts or not parts:
        return [0.0] * len(texts)
    if isinstance(stage, RerankStage):
        return [float(s) for s in np.max([stage.reranker.rerank(p, list(texts)) for p in parts], axis=0)]
    vectors = unit(stage.embedder.embed(list(texts)))
    query = unit(stage.embedder.embed(parts))
    return [float(s) for s in np.max(np.einsum("ij,kj->ik", vectors, query), axis=1)]


@lru_cache(maxsize=16)
def _build(kind: str, url: str, model: str, background: bool):
    from ..providers import embedders

    if kind == "embedded":
        return VectorStage(embedders.MPNetEmbedder(), background=background)
    if kind == "endpoint":
        return VectorStage(embedders.OpenAIEmbedder(url, model), background=background)
    from ..providers.rerankers import ServerReranker

    return RerankStage(ServerReranker(url, model))


def stage_for(settings, first_model: str | None, *, background: bool = False):
    """The second stage the settings ask for, or None (off). "auto" is the
    embedded all-mpnet-base-v2 behind the embedded MiniLM (the pair the
    floors and constants were measured on) and off behind any other first
    stage; "embedded", "endpoint" (`/v1/embeddings`) and "rerank" (`/rerank`)
    choose outright. Built once per configuration (models load on first use)."""
    from ..providers.embedders import MINILM_ID

    kind = getattr(settings, "second_stage", "auto") or "auto"
    if kind == "off" or (kind == "auto" and first_model != MINILM_ID):
        return None
    kind = "embedded" if kind == "auto" else kind
    url = getattr(settings, "second_stage_url", "") or getattr(settings, "endpoint_url", "")
    return _build(kind, url, getattr(settings, "second_stage_model", ""), bool(background))


def start_background(db, campaign_id: int, settings, embedder, *, progress: bool = False):
    """Start (or find running) the background pass that computes the second
    stage's passage vectors for a campaign; None when the configured stage
    stores none (off, or a server's /rerank). Never waits for it."""
    stage = stage_for(settings, getattr(embedder, "model_id", None), background=True)
    if stage is None or not stage.needs_vectors:
        return None
    return stage_vectors.start(db, campaign_id, stage.embedder, progress=progress)
