"""Keeping passage vectors up to date with the configured embedder.

Embedding is derived work: it runs after an import has committed, and a dead
or slow embedder never costs the import, the lexical index or a turn. A pass
embeds what is pending (no vector yet, or a vector from another model), writes
each batch in its own short transaction so finished work survives a failure,
and records the outcome on each source in words.

A model switch makes every vector pending: the new model's vectors replace the
old one by one, and retrieval only ever compares vectors of the model it is
querying with, so two models are never mixed in one ranking.
"""
from __future__ import annotations

from sqlalchemy import delete, func, select, update
from tqdm.auto import tqdm

from ..search.lexical import index_line
from ..search.results import EmbeddingPass
from ..search.vectors import pack
from ..store import Database
from ..store.knowledge_tables import KnowledgeEmbeddingRow, KnowledgePassageRow, KnowledgeSourceRow
from ..store.models import utcnow
from .chunking import CHUNKING_VERSION

__all__ = ["BATCH", "MAX_PER_PASS", "EmbeddingPass", "catch_up", "clear_vectors", "pending_count"]

# 32 passages of up to 800 tokens per request: the same batch the embedders
# use, so one request fits the endpoint embedder's 60 s timeout on a CPU box.
BATCH = 32
# What the turn loop's background pass embeds at most, so a large first import
# does not hold a turn's derived work open; the next pass continues.
MAX_PER_PASS = 512
_DETAIL_LIMIT = 2000


def _pending_query(campaign_id: int, model: str):
    current = (
        select(KnowledgeEmbeddingRow.passage_id)
        .where(KnowledgeEmbeddingRow.campaign_id == campaign_id, KnowledgeEmbeddingRow.model == model)
    )
    return (
        select(KnowledgePassageRow.id, KnowledgePassageRow.source_id, KnowledgePassageRow.heading,
               KnowledgePassageRow.text)
        .join(KnowledgeSourceRow, KnowledgeSourceRow.id == KnowledgePassageRow.source_id)
        .where(KnowledgePassageRow.campaign_id == campaign_id, KnowledgeSourceRow.enabled.is_(True),
               KnowledgeSourceRow.index_state == "ready", KnowledgePassageRow.id.not_in(current))
        .order_by(KnowledgePassageRow.id)
    )


def pending_count(session, campaign_id: int, model: str) -> int:
    return session.scalar(select(func.count()).select_from(_pending_query(campaign_id, model).subquery())) or 0


def _store(db: Database, campaign_id: int, model: str, batch: list, vectors) -> int:
    """Replace the vectors of the batch's passages (those still present) in one transaction."""
    ids = [r.id for r in batch]
    with db.writing() as s:
        alive = set(s.scalars(select(KnowledgePassageRow.id).where(KnowledgePassageRow.id.in_(ids))))
        s.execute(delete(KnowledgeEmbeddingRow).where(KnowledgeEmbeddingRow.passage_id.in_(alive)))
        now = utcnow()
        s.add_all(
            KnowledgeEmbeddingRow(passage_id=r.id, source_id=r.source_id, campaign_id=campaign_id, model=model,
                                  dimensions=int(v.shape[0]), vector=pack(v), chunking_version=CHUNKING_VERSION,
                                  created_at=now)
            for r, v in zip(batch, vectors, strict=True) if r.id in alive
        )
        return len(alive)


def _mark_failed(db: Database, source_ids: set[int], detail: str) -> None:
    with db.writing() as s:
        s.execute(update(KnowledgeSourceRow).where(KnowledgeSourceRow.id.in_(source_ids))
                  .values(embed_state="failed", embed_detail=detail[:_DETAIL_LIMIT]))


def settle(db: Database, campaign_id: int, model: str | None) -> None:
    """Each enabled, indexed source's embed_state from what is actually stored."""
    with db.writing() as s:
        if not model:
            s.execute(update(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == campaign_id,
                                                      KnowledgeSourceRow.embed_state != "failed")
                      .values(embed_state="idle", embed_detail=""))
            return
        waiting = set(s.scalars(_pending_query(campaign_id, model).with_only_columns(
            KnowledgePassageRow.source_id).distinct().order_by(None)))
        for source in s.scalars(select(KnowledgeSourceRow).where(
                KnowledgeSourceRow.campaign_id == campaign_id, KnowledgeSourceRow.enabled.is_(True),
                KnowledgeSourceRow.index_state == "ready")):
            if source.id in waiting:  # a pass just succeeded: an older failure is history
                source.embed_state, source.embed_detail = "pending", ""
            else:
                source.embed_state, source.embed_detail = "ok", ""


def _settled(session, campaign_id: int) -> bool:
    """Nothing pending and every source already says so: the common case after
    each turn, which then needs no write transaction (settling anyway cost a
    write lock and ~1 ms per turn)."""
    return session.scalar(select(KnowledgeSourceRow.id).where(
        KnowledgeSourceRow.campaign_id == campaign_id, KnowledgeSourceRow.enabled.is_(True),
        KnowledgeSourceRow.index_state == "ready", KnowledgeSourceRow.embed_state != "ok").limit(1)) is None


def catch_up(db: Database, campaign_id: int, embedder, *, limit: int | None = MAX_PER_PASS,
             progress: bool = False) -> EmbeddingPass:
    """Embed up to `limit` pending passages (None: all of them). Never raises
    for an embedder failure: the error is recorded on the sources it touched
    and returned, and those passages stay pending for the next pass."""
    if embedder is None:
        settle(db, campaign_id, None)
        return EmbeddingPass("", 0, 0)
    model = embedder.model_id
    with db.reading() as s:
        query = _pending_query(campaign_id, model)
        todo = s.execute(query.limit(limit) if limit else query).all()
        if not todo and _settled(s, campaign_id):
            return EmbeddingPass(model, 0, 0)
        total = pending_count(s, campaign_id, model)
    written, error = _embed_batches(db, campaign_id, embedder, todo, progress)
    if not error:
        settle(db, campaign_id, model)
    return EmbeddingPass(model, written, max(0, total - written), error)


def _embed_batches(db: Database, campaign_id: int, embedder, todo: list, progress: bool) -> tuple[int, str]:
    """(vectors written, error in words): batch by batch, each committed, so a
    failure keeps what was done and leaves the rest pending."""
    written = 0
    with tqdm(total=len(todo), desc="embedding passages", unit="passage", disable=not progress or not todo,
              leave=False) as bar:
        for start in range(0, len(todo), BATCH):
            batch = todo[start:start + BATCH]
            try:
                vectors = embedder.embed([index_line(r.heading, r.text) for r in batch])
                if len(vectors) != len(batch):
                    raise ValueError(f"asked for {len(batch)} vectors, got {len(vectors)}")
            except Exception as exc:  # any embedder failure is recorded, never raised
                error = f"{type(exc).__name__}: {exc}"
                _mark_failed(db, {r.source_id for r in todo[start:]}, error)
                return written, error
            written += _store(db, campaign_id, embedder.model_id, batch, vectors)
            bar.update(len(batch))
    return written, ""


def clear_vectors(db: Database, campaign_id: int, source_ids: list[int] | None = None) -> int:
    """Delete stored vectors (all of the campaign's, or of some sources): the
    semantic half of a reindex. Touches no source text, passage or story row."""
    with db.writing() as s:
        query = delete(KnowledgeEmbeddingRow).where(KnowledgeEmbeddingRow.campaign_id == campaign_id)
        if source_ids is not None:
            passages = select(KnowledgePassageRow.id).where(KnowledgePassageRow.source_id.in_(source_ids))
            query = query.where(KnowledgeEmbeddingRow.passage_id.in_(passages))
        removed = s.execute(query).rowcount or 0
        sources = update(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == campaign_id)
        if source_ids is not None:
            sources = sources.where(KnowledgeSourceRow.id.in_(source_ids))
        s.execute(sources.values(embed_state="idle", embed_detail=""))
        return removed
