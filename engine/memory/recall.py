"""Which memories the next prompt carries: cosine top-k over the path's bank.

Read-only: use counts are recorded in the turn's own commit. The query is the
recent story (the last 4 story nodes, at most 600 tokens, newest first: see
`tokens.newest_first`), taken from the path the turn is built on, so a
retried take is never part of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select

from ..budget import tokens
from ..store.memory_tables import MemoryRow
from ..story.lineage import Path
from .bank import on_path, recent_story
from .vectors import CACHE, cache_key, cosines

__all__ = ["Recall", "recall", "query_text", "REDUNDANT_SIMILARITY", "RECALL_NODES", "RECALL_TOKENS"]

RECALL_NODES = 4
RECALL_TOKENS = 600
# Measured on the reference's embedding model: redundant "party walks the
# muddy road" pairs scored 0.938-0.996, distinct pairs 0.349-0.906. Missing a
# duplicate costs some budget; dropping a distinct fact costs the narrator
# something it needed, so the bar is high. Model-dependent by nature.
REDUNDANT_SIMILARITY = 0.93


@dataclass
class Recall:
    used: list[dict] = field(default_factory=list)
    report: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return [m["id"] for m in self.used]


def query_text(session, path: Path, pending: str = "", recent: list[str] | None = None) -> str:
    """The newest story nodes, the reader's new input counted among them.
    `recent` (the newest story texts, oldest first) spares a read when the
    caller has them already: the turn reads them once for memories, cards and knowledge."""
    texts = recent_story(session, path, RECALL_NODES) if recent is None else recent[-RECALL_NODES:]
    texts = (texts + [pending])[-RECALL_NODES:] if pending else texts
    return tokens.newest_first(texts, RECALL_TOKENS)


def _catalogue(session, path: Path, model_id: str) -> list[tuple[int, bool, str]]:
    # Core execution on the session's connection: the ORM result layer cost
    # 3 ms of a 1,000-memory recall for rows that are plain tuples anyway.
    return session.connection().execute(
        select(MemoryRow.id, MemoryRow.pinned, MemoryRow.authority)
        .where(on_path(path), MemoryRow.forgotten.is_(False), MemoryRow.vector_model == model_id)).all()


def recall(session, campaign_id: int, path: Path, embedder, top_k: int, pending: str = "",
           recent: list[str] | None = None) -> Recall:
    if embedder is None:
        return Recall(report={"used": [], "error": "No embedder is configured, so no memories are recalled."})
    catalogue = _catalogue(session, path, embedder.model_id)
    query = query_text(session, path, pending, recent)
    if not catalogue or not query.strip():
        return Recall(report={"used": [], "considered": len(catalogue), "suppressed": [], "error": None})
    try:
        q = embedder.embed([query])[0]
    except Exception as exc:  # noqa: BLE001 - a failed recall must not fail the turn
        return Recall(report={"used": [], "error": f"The query could not be embedded: {exc}"})
    ids = [c[0] for c in catalogue]

    def load(missing):
        return dict(session.execute(select(MemoryRow.id, MemoryRow.vector).where(MemoryRow.id.in_(missing))).all())

    # Unit vectors as one matrix, row for row with `vectors.ids` (the ids that
    # have one); the same matrix every turn the bank is unchanged. Keyed by the
    # open database behind `session`, not by its path, which a file made again
    # at that path would share.
    vectors = CACHE.get(cache_key(session, campaign_id, embedder.model_id), ids, load)
    scores = dict(zip(vectors.ids, cosines(vectors.vectors, q).tolist(), strict=True))
    meta = {c[0]: c for c in catalogue}
    chosen, suppressed = _choose(sorted(scores, key=scores.get, reverse=True), meta, vectors, max(1, top_k))
    rows = {r.id: r for r in session.scalars(select(MemoryRow).where(MemoryRow.id.in_(chosen)))}
    used = [{"id": i, "text": rows[i].text, "similarity": round(scores[i], 4), "pinned": rows[i].pinned,
             "authority": rows[i].authority,
             "source": {"branch_id": rows[i].branch_id, "depth": rows[i].depth,
                        "source_start": rows[i].source_start, "source_end": rows[i].source_end}}
            for i in sorted(chosen, key=scores.get, reverse=True)]
    return Recall(used, {"used": used, "considered": len(catalogue), "suppressed": suppressed, "error": None,
                         "query": query[-200:]})


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
