"""Which memories the next prompt carries: the bank scored against the
reader's line first, then the newest story, part by part.

Read-only: use counts are recorded in the turn's own commit. The query's
parts are the reader's new input (an action or a direction) and the newest
story nodes (the tuning's `recall_nodes`, newest first), taken from the path the turn is
built on, so a retried take is never part of it. Each memory's score is its
best cosine against any part (a story part counts the tuning's `story_weight`
of the reader's line), plus the lexical evidence of the reader's own words in it.

Why parts and words: the query was once the input and the newest story as
one embedded text; a 200-turn campaign's probe "I walk down to the ferry at
Ashwater." was outweighed by the newest filler and recalled five memories
about rivers and bread (the recall evaluation's first run). The knowledge
path learned the same (`engine.search.query.query_parts`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select

from ..budget import tokens
from ..search.recall import choose, rank_units, rarity_share
from ..search.tuning import DEFAULT, Tuning
from ..store.memory_tables import MemoryRow
from ..story.lineage import Path
from ..vectors import QUERIES
from .bank import on_path, recent_story
from .guard import terms
from .vectors import CACHE, cache_key, cosines

__all__ = ["Recall", "recall", "query_text", "query_parts", "terms", "METHODS", "Judge"]

# How many story nodes and tokens a recall reads, how a story part and the
# reader's words weigh, the redundancy bar and how many a judge re-scores are
# fields of `engine.search.Tuning`, each beside its measurement.
METHODS = ("parts", "single")
# (query parts, memory texts) -> one relevance score per text.
Judge = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


@dataclass
class Recall:
    used: list[dict] = field(default_factory=list)
    report: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return [m["id"] for m in self.used]


def query_text(session, path: Path, pending: str = "", recent: list[str] | None = None,
               tuning: Tuning = DEFAULT) -> str:
    """The newest story nodes, the reader's new input counted among them, as
    one text (newest first): the report's query, and the "single" method's."""
    n = tuning.recall_nodes
    texts = recent_story(session, path, n) if recent is None else recent[-n:]
    texts = (texts + [pending])[-n:] if pending else texts
    return tokens.newest_first(texts, tuning.recall_tokens)


def query_parts(pending: str, story: list[str], tuning: Tuning = DEFAULT) -> list[tuple[str, float]]:
    """(text, weight) parts: the reader's line at weight 1, then the newest
    story texts (oldest first in `story`), newest first, at `story_weight`."""
    parts = [(pending.strip(), 1.0)] if pending and pending.strip() else []
    for text in reversed([t for t in story if t and t.strip()][-tuning.recall_nodes:]):
        parts.append((tokens.last(text.strip(), tuning.recall_tokens), tuning.story_weight))
    return parts


def _catalogue(session, path: Path, model_id: str) -> list[tuple[int, bool, str, str]]:
    # Core execution on the session's connection: the ORM result layer cost
    # 3 ms of a 1,000-memory recall for rows that are plain tuples anyway.
    return session.connection().execute(
        select(MemoryRow.id, MemoryRow.pinned, MemoryRow.authority, MemoryRow.text)
        .where(on_path(path), MemoryRow.forgotten.is_(False), MemoryRow.vector_model == model_id)).all()


def _part_cosines(embedder, vectors, parts: list[tuple[str, float]], query: str, method: str
                  ) -> list[tuple[np.ndarray, float]]:
    """Each query part's cosines over the bank, with its weight ("parts"), or
    the whole query as one text at weight 1 ("single", the old way).

    The parts are embedded through the shared query-vector cache
    (`engine.vectors.QUERIES`), so only text no earlier query held is
    embedded: a turn's newest story nodes were the previous turn's parts
    too, and a single-paragraph node is also a part of the knowledge query
    embedded by the same model."""
    if method == "single":
        return [(cosines(vectors.vectors, embedder.embed([query])[0]), 1.0)]
    queries = QUERIES.embed(embedder, [text for text, _ in parts])
    return [(cosines(vectors.vectors, q), w) for q, (_, w) in zip(queries, parts, strict=True)]


def recall(session, campaign_id: int, path: Path, embedder, top_k: int, pending: str = "",
           recent: list[str] | None = None, *, method: str = "parts", judge: Judge | None = None,
           tuning: Tuning = DEFAULT) -> Recall:
    """The memories for the next prompt, scored by the search layer
    (`engine.search.recall`) with `tuning`; the report records it."""
    if embedder is None:
        return Recall(report={"used": [], "error": "No embedder is configured, so no memories are recalled."})
    catalogue = _catalogue(session, path, embedder.model_id)
    n = tuning.recall_nodes
    story = recent_story(session, path, n) if recent is None else recent[-n:]
    query = query_text(session, path, pending, story, tuning)
    parts = query_parts(pending, story, tuning)
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
        cosines_by_part = _part_cosines(embedder, vectors, parts, query, method)
    except Exception as exc:  # noqa: BLE001 - a failed recall must not fail the turn
        return Recall(report={"used": [], "error": f"The query could not be embedded: {exc}"})
    meta = {c[0]: c for c in catalogue}
    # The reader's own words, or on a Continue the newest story's.
    said = terms(parts[0][0]) if parts and method == "parts" else frozenset()
    lexical = rarity_share(said, {i: meta[i][3] for i in vectors.ids}, terms)
    found = rank_units(list(vectors.ids), cosines_by_part, lexical, tuning)
    ranked = found.order
    judged = _judged(judge, parts, ranked[:tuning.judged], lexical, meta, tuning) if judge is not None else {}
    ranked = sorted(judged, key=judged.get, reverse=True) + ranked[len(judged):]
    chosen, suppressed = choose(ranked, max(1, top_k), pinned={i for i in ranked if meta[i][1]},
                                group={i: meta[i][2] for i in ranked}, vector_of=vectors.__getitem__,
                                bar=tuning.memory_redundant)
    used = [{"id": i, "text": meta[i][3], "similarity": round(found.cosine[i], 4),
             "lexical": round(lexical.get(i, 0.0), 4), "score": round(found.score[i], 4), "judged": i in judged,
             "pinned": bool(meta[i][1]), "authority": meta[i][2], "source": source}
            for i, source in _sources(session, chosen, ranked)]
    return Recall(used, {"used": used, "considered": len(catalogue), "suppressed": suppressed, "error": None,
                         "query": query[-200:], "parts": len(parts), "method": method,
                         "tuning": tuning.record()})


def _judged(judge: Judge, parts, best: list[int], lexical: dict[int, float], meta, tuning: Tuning
            ) -> dict[int, float]:
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
    return {i: float(r) + tuning.lexical_weight * lexical.get(i, 0.0) for i, r in zip(best, relevance, strict=True)}


def _sources(session, chosen: list[int], ranked: list[int]):
    """The chosen memories in their ranked order, with where each came from."""
    rows = {r[0]: r[1:] for r in session.execute(
        select(MemoryRow.id, MemoryRow.branch_id, MemoryRow.depth, MemoryRow.source_start, MemoryRow.source_end)
        .where(MemoryRow.id.in_(chosen))).all()}
    place = {i: n for n, i in enumerate(ranked)}
    for i in sorted(chosen, key=place.__getitem__):
        branch, depth, start, end = rows[i]
        yield i, {"branch_id": branch, "depth": depth, "source_start": start, "source_end": end}
