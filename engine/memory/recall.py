"""Which memories the next prompt carries: the bank scored against the
reader's line first, then the newest story, part by part.

Read-only: use counts are recorded in the turn's own commit. The query's
parts are the reader's new input (an action or a direction) and the newest
story nodes (RECALL_NODES, newest first), taken from the path the turn is
built on, so a retried take is never part of it. Each memory's score is its
best cosine against any part (a story part counts STORY_WEIGHT of the
reader's line), plus the lexical evidence of the reader's own words in it.

Why parts and words: the query was once the input and the newest story as
one embedded text; a 200-turn campaign's probe "I walk down to the ferry at
Ashwater." was outweighed by the newest filler and recalled five memories
about rivers and bread (issue 30). The knowledge path learned the same
(`knowledge.query.query_parts`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select

from ..budget import tokens
from ..store.memory_tables import MemoryRow
from ..story.lineage import Path
from ..vectors import QUERIES
from .bank import on_path, recent_story
from .guard import terms
from .vectors import CACHE, cache_key, cosines

__all__ = ["Recall", "recall", "query_text", "query_parts", "terms", "REDUNDANT_SIMILARITY", "RECALL_NODES",
           "RECALL_TOKENS", "STORY_WEIGHT", "LEXICAL_WEIGHT", "METHODS", "JUDGED", "Judge"]

RECALL_NODES = 4
RECALL_TOKENS = 600
# Measured on the reference's embedding model: redundant "party walks the
# muddy road" pairs scored 0.938-0.996, distinct pairs 0.349-0.906. Missing a
# duplicate costs some budget; dropping a distinct fact costs the narrator
# something it needed, so the bar is high. Model-dependent by nature.
REDUNDANT_SIMILARITY = 0.93
# A story part's cosine counts this share of the reader's line: the line is
# what the reader asked about; the story around it still recalls the scene on
# a Continue (no line) and when the line names nothing. Added to the best
# cosine: the share of the reader's words (weighed by their rarity in the
# bank) a memory holds, times LEXICAL_WEIGHT; names and places are rare, so
# "Ashwater" in the line lifts the one memory that holds it. Both chosen on
# the tuning half of the recall evaluation's probes (3 campaigns, 80 turns,
# 4,096): story 0.8 with lexical 1.0 had the fact in the memories section for
# 71 % of the tuning probes (lexical 0.5: 67 %, 0: 57 %; story 1.0 no better).
# Held-out: docs/research.md, recall_eval.
STORY_WEIGHT = 0.8
LEXICAL_WEIGHT = 1.0
METHODS = ("parts", "single")
# With a judge (a stronger relevance model, `knowledge.relevance`), this many
# of the first score's best memories are scored again by it. The turn passes
# none: all-mpnet-base-v2 as the judge was measured not to help (issue 25;
# recall_eval's three 200-turn guarded banks at 4,096, tuning half: the fact
# in the memories section for 18 of 21 probes without it, 18 judging the best
# 5, 16 judging 10 or 20). The seam stays for measuring another model
# (`experiments.recall_eval.judge_ab`).
JUDGED = 10
# (query parts, memory texts) -> one relevance score per text.
Judge = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


@dataclass
class Recall:
    used: list[dict] = field(default_factory=list)
    report: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return [m["id"] for m in self.used]


def query_text(session, path: Path, pending: str = "", recent: list[str] | None = None) -> str:
    """The newest story nodes, the reader's new input counted among them, as
    one text (newest first): the report's query, and the "single" method's."""
    texts = recent_story(session, path, RECALL_NODES) if recent is None else recent[-RECALL_NODES:]
    texts = (texts + [pending])[-RECALL_NODES:] if pending else texts
    return tokens.newest_first(texts, RECALL_TOKENS)


def query_parts(pending: str, story: list[str]) -> list[tuple[str, float]]:
    """(text, weight) parts: the reader's line at weight 1, then the newest
    story texts (oldest first in `story`), newest first, at STORY_WEIGHT."""
    parts = [(pending.strip(), 1.0)] if pending and pending.strip() else []
    for text in reversed([t for t in story if t and t.strip()][-RECALL_NODES:]):
        parts.append((tokens.last(text.strip(), RECALL_TOKENS), STORY_WEIGHT))
    return parts


def _lexical(words: frozenset[str], texts: dict[int, str]) -> dict[int, float]:
    """Per memory, the rarity-weighed share of `words` it holds (0-1)."""
    if not words or not texts:
        return {}
    held = {i: terms(t) & words for i, t in texts.items()}
    df = Counter(w for found in held.values() for w in found)
    n = len(texts)
    weight = {w: math.log((n + 1) / (df[w] + 0.5)) for w in words}
    total = sum(weight.values()) or 1.0
    return {i: sum(weight[w] for w in found) / total for i, found in held.items() if found}


def _catalogue(session, path: Path, model_id: str) -> list[tuple[int, bool, str, str]]:
    # Core execution on the session's connection: the ORM result layer cost
    # 3 ms of a 1,000-memory recall for rows that are plain tuples anyway.
    return session.connection().execute(
        select(MemoryRow.id, MemoryRow.pinned, MemoryRow.authority, MemoryRow.text)
        .where(on_path(path), MemoryRow.forgotten.is_(False), MemoryRow.vector_model == model_id)).all()


def _scores(embedder, vectors, parts: list[tuple[str, float]], query: str, method: str) -> dict[int, float]:
    """Each memory's best weighed cosine over the parts ("parts"), or its
    cosine against the whole query as one text ("single", the old way).

    The parts are embedded through the shared query-vector cache
    (`engine.vectors.QUERIES`), so only text no earlier query held is
    embedded: a turn's newest story nodes were the previous turn's parts
    too, and a single-paragraph node is also a part of the knowledge query
    (`knowledge.query.query_parts`) embedded by the same model. The vectors
    are the embedder's own, so the scores are those of embedding every part."""
    if method == "single":
        return dict(zip(vectors.ids, cosines(vectors.vectors, embedder.embed([query])[0]).tolist(), strict=True))
    queries = QUERIES.embed(embedder, [text for text, _ in parts])
    best = np.max([cosines(vectors.vectors, q) * w for q, (_, w) in zip(queries, parts, strict=True)], axis=0)
    return dict(zip(vectors.ids, np.atleast_1d(best).tolist(), strict=True))


def recall(session, campaign_id: int, path: Path, embedder, top_k: int, pending: str = "",
           recent: list[str] | None = None, *, method: str = "parts", judge: Judge | None = None) -> Recall:
    if embedder is None:
        return Recall(report={"used": [], "error": "No embedder is configured, so no memories are recalled."})
    catalogue = _catalogue(session, path, embedder.model_id)
    story = recent_story(session, path, RECALL_NODES) if recent is None else recent[-RECALL_NODES:]
    query = query_text(session, path, pending, story)
    parts = query_parts(pending, story)
    if not catalogue or not query.strip():
        return Recall(report={"used": [], "considered": len(catalogue), "suppressed": [], "error": None})
    ids = [c[0] for c in catalogue]

    def load(missing):
        return dict(session.execute(select(MemoryRow.id, MemoryRow.vector).where(MemoryRow.id.in_(missing))).all())

    # Unit vectors as one matrix, row for row with `vectors.ids` (the ids that
    # have one); the same matrix every turn the bank is unchanged. Keyed by the
    # open database behind `session`, not by its path, which a file made again
    # at that path would share.
    vectors = CACHE.get(cache_key(session, campaign_id, embedder.model_id), ids, load)
    try:
        cosine = _scores(embedder, vectors, parts, query, method)
    except Exception as exc:  # noqa: BLE001 - a failed recall must not fail the turn
        return Recall(report={"used": [], "error": f"The query could not be embedded: {exc}"})
    meta = {c[0]: c for c in catalogue}
    # The reader's own words, or on a Continue the newest story's.
    said = terms(parts[0][0]) if parts and method == "parts" else frozenset()
    lexical = _lexical(said, {i: meta[i][3] for i in cosine})
    scores = {i: c + LEXICAL_WEIGHT * lexical.get(i, 0.0) for i, c in cosine.items()}
    ranked = sorted(scores, key=scores.get, reverse=True)
    judged = _judged(judge, parts, ranked[:JUDGED], lexical, meta) if judge is not None else {}
    ranked = sorted(judged, key=judged.get, reverse=True) + ranked[len(judged):]
    chosen, suppressed = _choose(ranked, meta, vectors, max(1, top_k))
    used = [{"id": i, "text": meta[i][3], "similarity": round(cosine[i], 4), "lexical": round(lexical.get(i, 0.0), 4),
             "score": round(scores[i], 4), "judged": i in judged, "pinned": bool(meta[i][1]),
             "authority": meta[i][2], "source": source}
            for i, source in _sources(session, chosen, ranked)]
    return Recall(used, {"used": used, "considered": len(catalogue), "suppressed": suppressed, "error": None,
                         "query": query[-200:], "parts": len(parts), "method": method})


def _judged(judge: Judge, parts, best: list[int], lexical: dict[int, float], meta) -> dict[int, float]:
    """{memory: the judge's relevance against the query's parts plus the same
    lexical evidence} for the first score's best (`best`); they are ordered
    by it among themselves, above every memory the judge did not see. Empty
    when the judge fails: the first order stands, as in a turn without one."""
    if not best:
        return {}
    try:
        relevance = judge([text for text, _ in parts], [meta[i][3] for i in best])
    except Exception:  # noqa: BLE001 - a judge that fails must not fail the recall
        return {}
    return {i: float(r) + LEXICAL_WEIGHT * lexical.get(i, 0.0) for i, r in zip(best, relevance, strict=True)}


def _sources(session, chosen: list[int], ranked: list[int]):
    """The chosen memories in their ranked order, with where each came from."""
    rows = {r[0]: r[1:] for r in session.execute(
        select(MemoryRow.id, MemoryRow.branch_id, MemoryRow.depth, MemoryRow.source_start, MemoryRow.source_end)
        .where(MemoryRow.id.in_(chosen))).all()}
    place = {i: n for n, i in enumerate(ranked)}
    for i in sorted(chosen, key=place.__getitem__):
        branch, depth, start, end = rows[i]
        yield i, {"branch_id": branch, "depth": depth, "source_start": start, "source_end": end}


def _choose(ranked, meta, vectors, top_k):
    """Pinned always (they count toward top_k); then the best of the rest,
    skipping near-duplicates of a kept memory with the same authority."""
    pinned = [i for i in ranked if meta[i][1]]
    kept, suppressed = [], []
    for i in ranked:
        if meta[i][1] or len(kept) >= max(0, top_k - len(pinned)):
            continue
        twin = next((k for k in kept if meta[k][2] == meta[i][2]
                     and float(vectors[i] @ vectors[k]) >= REDUNDANT_SIMILARITY), None)
        if twin is None:
            kept.append(i)
        else:
            suppressed.append({"id": i, "duplicate_of": twin})
    return pinned + kept, suppressed
