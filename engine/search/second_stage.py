"""The second stage: a stronger relevance model scores the first stage's candidates again.

The first stage (FTS5/bm25 re-scored by rarity, and MiniLM's cosine) is
cheap and finds the right passage among its few dozen candidates for most
scenes, but cannot order them: MiniLM put a relevant passage first for 22
of 58 held-out scenes, all-mpnet-base-v2 re-scoring the same candidates for
39. So the candidates of both paths are scored again by the
second model, and admission (its own measured floor, from the same registry
as the first model's) and order use that score.

One seam, three backends:
- `VectorStage` over an embedder: all-mpnet-base-v2 embedded on the CPU, or
  a server's `/v1/embeddings`. Passage vectors are computed ahead of play
  (`stage_vectors`); a turn embeds only its query.
- `RerankStage` over a server's `/rerank` (llama.cpp `--reranking`, vLLM,
  TEI): the query and the candidates' text in, scores out, per turn.
- none: first stage only, said in the report and the library status.

A VectorStage's queries are centred as its floor was measured
(`calibration.centred`): EmbeddingGemma's prompted queries share one large
direction, and taking it off is what lets a scene's subject, not its being
a scene, decide what it is near.

When the second stage cannot judge a turn (vectors still being computed for
some candidate, no calibrated floor, the model failed), the turn uses the
first stage alone and the report says why: two models' scores are never
mixed in one ranking.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..vectors import QUERIES
from . import stage_vectors
from .calibration import calibrated_models, centred, floor_for
from .tuning import DEFAULT, Tuning
from .vectors import unit

__all__ = ["EVIDENCE_CLIP", "FUSIONS", "KINDS", "Fusion", "admission_floor", "RerankStage", "Rescored", "VectorStage", "evidence_feature", "fusion_for", "relevance", "rescore", "stage_for", "start_background",
           "uncalibrated_stage_note"]

KINDS = ("auto", "embedded", "endpoint", "rerank", "off")
# How many candidates it judges, how many query parts it reads and whether it
# scans the whole library are fields of `Tuning` (stage_candidates,
# stage_parts, scan_candidates), each with its measurement.


@dataclass(frozen=True)
class Fusion:
    """A small relevance model over one pair of models: the second model's
    score, the first model's cosine and the lexical evidence (over the
    scene's own bar) combined by a logistic regression fitted on the tuning
    half of the retrieval evaluation, with its own floor (on the fused
    probability), relative cut to the best and admitted-count cap.

    Why fused: on its own the second model's cosine orders the candidates
    well but cannot tell an everyday scene from a targeted one at a floor
    that keeps paraphrases; the lexical evidence is what says "this passage
    names what the scene names". Each constant is fitted on one pair of
    models and means nothing for another, so a pair without one uses the
    second model's plain score and its calibrated floor."""

    bias: float
    second: float
    cosine: float
    evidence: float
    floor: float
    cut: float
    cap: int

    def score(self, second: float, cosine: float, evidence: float) -> float:
        z = self.bias + self.second * second + self.cosine * cosine + self.evidence * evidence
        return 1.0 / (1.0 + math.exp(-z))


# The lexical feature is the candidate's evidence over what the scene asks
# (admission.Weights.required), clipped: past twice the bar more shared rare
# words say no more about relevance (a stat block naming every word of a
# long scene), and unclipped ratios let one feature swamp the fit.
EVIDENCE_CLIP = 2.0


def evidence_feature(evidence: float, required: float) -> float:
    """Lexical evidence on the fused model's scale (0 without a lexical bar)."""
    if required <= 0 or evidence <= 0:
        return 0.0
    return min(evidence / required, EVIDENCE_CLIP)


# (first model, second model) -> its fused relevance model; filled from the
# tuning half of notebooks/retrieval_eval.ipynb ("Second-stage constants"),
# as `make evidence` runs it (all four documents; evidence/retrieval_eval.*).
# MiniLM then all-mpnet-base-v2: a logistic regression (balanced classes)
# over every tuning-half candidate (93 targeted and 41 everyday scenes of the
# rules reference, the novel, the wiki and The Time Machine), then the floor,
# cut and cap by the sweep's rule (`experiments.retrieval_eval.choose`: at most
# one of the 41 everyday tuning scenes admitting at 4,096, then the most hits,
# then precision): floor 0.814 (48 of 93 hits, no everyday scene), cut 0.9,
# cap 3. A first fit on three documents (without the rules reference) had
# given bias -4.978, mpnet 9.197, MiniLM 1.985, evidence 4.084, floor 0.731;
# with the rules reference the lexical evidence weighs about half as much.
# MiniLM then EmbeddingGemma-300M at full precision (relevance_model=
# "embeddinggemma") had one, fitted on its uncentred cosine; with its queries
# centred its plain cosine found 59 tuning scenes through the engine against
# the refitted fused model's 52 (scratch run of the notebook with
# `-p relevance_model embeddinggemma`), so it has none now.
# MiniLM then the int8 copy (the default relevance model where make setup
# made it) has none: with its queries centred (calibration.centred), its
# plain cosine 0.03 over its calibrated floor (0.23) with its own scan of the
# library found 60 tuning scenes through the engine with one everyday scene
# admitting, the fused model at most 50 (Tuning's scan_candidates,
# second_cap, second_cut, second_floor_margin; held out 60 of 91, 43 %
# precise, 1 of 41 everyday, 9 of 15 paraphrases, evidence/retrieval_eval.json).
FUSIONS: dict[tuple[str, str], Fusion] = {
    ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"):
        Fusion(bias=-5.249, second=10.799, cosine=2.059, evidence=2.332, floor=0.814, cut=0.9, cap=3),
}


def fusion_for(first_model: str | None, second_model: str, tuning: Tuning | None = None) -> Fusion | None:
    """The fused model for this pair: the tuning's own when it names one,
    else the fitted registry's (None: the pair has none)."""
    if tuning is not None and not tuning.fused:
        return None
    if tuning is not None and tuning.fusion:
        bias, second, cosine, evidence, floor, cut, cap = tuning.fusion
        return Fusion(bias, second, cosine, evidence, floor, cut, int(cap))
    return FUSIONS.get((first_model or "", second_model))


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
    fusion: Fusion | None = None  # when set, `scores` are fused and `raw` the model's own
    raw: dict[int, float] = field(default_factory=dict)


class VectorStage:
    """An embedder whose passage vectors are stored ahead of play."""

    needs_vectors = True

    def __init__(self, embedder, *, background: bool = False):
        self.embedder = embedder
        self.model_id = embedder.model_id
        self.background = background

    def query(self, parts: Sequence[str]) -> np.ndarray:
        """The scene's query vectors, one per part. A part embedded before (in
        the last turn's query, or prepared after it: `engine.knowledge.prepare`) is not
        embedded again; this model's forward pass is most of a turn's
        retrieval time (see engine.vectors). Centred as its floor was
        measured (`calibration.centred`)."""
        return centred(self.model_id, QUERIES.embed(self.embedder, list(parts)))

    def scan(self, session, db, campaign_id: int, live_sources, parts: Sequence[str], k: int,
             exclude=frozenset()) -> tuple[list[int], np.ndarray | None]:
        """(the second model's own best `k` passages of the whole live library
        for the scene's query `parts`, a third candidate path; the parts'
        vectors), or ([], None) while its vectors are incomplete: the query is
        embedded only for a library the model can scan."""
        held = stage_vectors.library_matrix(session, db, campaign_id, self.model_id, live_sources)
        if held is None or k <= 0:
            return [], None
        query = self.query(parts)
        ids, matrix = held
        scores = np.max(np.einsum("ij,kj->ik", matrix, query), axis=1)
        top = np.argsort(-scores, kind="stable")[:k + len(exclude)]
        return [int(ids[i]) for i in top if int(ids[i]) not in exclude][:k], query

    def score(self, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]], out: Rescored,
              query: np.ndarray | None = None) -> None:
        """Cosine of each candidate's stored vector with the best query part
        (`query`: the parts' vectors, when the turn's scan embedded them already)."""
        vectors = stage_vectors.vectors_for(session, self.model_id, [h for _, h, _ in candidates])
        out.ready = sum(h in vectors for _, h, _ in candidates)
        if out.ready < len(candidates):
            done, total = stage_vectors.coverage(session, _campaign_of(session, candidates), self.model_id)
            out.note = (f"The second stage ({self.model_id}) is still computing passage vectors ({done} of "
                        f"{total} passages ready); this turn used the first stage alone.")
            return
        query = self.query(parts) if query is None else query
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

    def score(self, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]], out: Rescored,
              query=None) -> None:
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


def admission_floor(model_id: str, fusion: Fusion | None, tuning: Tuning = DEFAULT) -> float | None:
    """What a candidate's score must reach for the second stage to admit it:
    the fused model's own floor, or the model's calibrated floor plus the
    tuning's margin; None for a model with no calibrated floor."""
    if fusion is not None:
        return fusion.floor
    floor = floor_for(model_id, tuning)
    return None if floor is None else round(floor + tuning.second_floor_margin, 4)


def rescore(stage, session, parts: Sequence[str], candidates: Sequence[tuple[int, str, str]], *,
            first_model: str | None = None, features: Mapping[int, tuple[float, float]] | None = None,
            query: np.ndarray | None = None, tuning: Tuning = DEFAULT) -> Rescored:
    """Score `candidates` ((passage id, content hash, embedded line)) for the
    scene's `parts`. With a fused model for (`first_model`, this stage's
    model) and `features` ({passage id: (first cosine, evidence feature)}),
    the scores are fused (see `Fusion`) and admission uses its floor.
    Never raises: a failure is a note, and the turn keeps the first stage."""
    fusion = fusion_for(first_model, stage.model_id, tuning) if features is not None else None
    out = Rescored(model=stage.model_id, floor=admission_floor(stage.model_id, fusion, tuning),
                   candidates=len(candidates), fusion=fusion)
    if out.floor is None:
        out.note = uncalibrated_stage_note(stage.model_id)
        return out
    if not candidates or not parts:
        out.note = "The first stage found no candidates for the second to judge."
        return out
    try:
        stage.score(session, list(parts)[:tuning.stage_parts], candidates, out, query=query)
    except Exception as exc:  # a model or server failure narrows the turn to the first stage
        out.used, out.scores = False, {}
        out.note = (f"The second stage ({stage.model_id}) failed this turn ({type(exc).__name__}: {exc}); "
                    "the first stage was used alone.")
    if out.used and fusion is not None:
        out.raw = dict(out.scores)
        out.scores = {pid: fusion.score(s, *features.get(pid, (0.0, 0.0))) for pid, s in out.raw.items()}
    return out


def relevance(stage, query_parts: Sequence[str], texts: Sequence[str], tuning: Tuning = DEFAULT) -> list[float]:
    """The second model's score of each text for a query, with nothing
    stored: for a caller with a handful of texts (a memory judge, see
    memory recall's `judged`). A VectorStage embeds the texts here, so keep
    them few."""
    parts = [p for p in query_parts if p and p.strip()][:tuning.stage_parts]
    if not texts or not parts:
        return [0.0] * len(texts)
    if isinstance(stage, RerankStage):
        return [float(s) for s in np.max([stage.reranker.rerank(p, list(texts)) for p in parts], axis=0)]
    vectors = unit(stage.embedder.embed(list(texts)))
    query = centred(stage.model_id, QUERIES.embed(stage.embedder, parts))
    return [float(s) for s in np.max(np.einsum("ij,kj->ik", vectors, query), axis=1)]


@lru_cache(maxsize=16)
def _build(kind: str, url: str, model: str, background: bool):
    from ..providers import embedders

    if kind == "embedded":
        local = {"embeddinggemma": embedders.EmbeddingGemmaEmbedder, "mpnet": embedders.MPNetEmbedder,
                 "embeddinggemma-int8": lambda: embedders.EmbeddingGemmaEmbedder(int8=True)}[model]
        return VectorStage(local(), background=background)
    if kind == "endpoint":
        return VectorStage(embedders.OpenAIEmbedder(url, model), background=background)
    from ..providers.rerankers import ServerReranker

    return RerankStage(ServerReranker(url, model))


def stage_for(settings, first_model: str | None, *, background: bool = False):
    """The second stage the settings ask for, or None (off). "auto" is the
    embedded relevance model (the `relevance_model` setting: EmbeddingGemma-300M
    where it is installed, else all-mpnet-base-v2) behind the embedded MiniLM
    (the pair the floors were measured on) and off behind any other first
    stage; "embedded", "endpoint" (`/v1/embeddings`) and "rerank" (`/rerank`)
    choose outright. A relevance model that is the first stage's own (MiniLM)
    adds nothing: no second stage. Built once per configuration (models load
    on first use)."""
    from ..providers.embedders import MINILM_ID

    kind = getattr(settings, "second_stage", "auto") or "auto"
    if kind == "off" or (kind == "auto" and first_model != MINILM_ID):
        return None
    kind = "embedded" if kind == "auto" else kind
    if kind == "embedded":
        model = getattr(settings, "relevance_model", None) or "mpnet"
        return None if model == "minilm" else _build(kind, "", model, bool(background))
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
