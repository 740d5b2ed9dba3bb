"""Storing a source and (re)building its passages.

`add_source` runs every check before it writes anything, then writes the
source, its passages and (through triggers) their index rows in the caller's
transaction: a refusal or a crash leaves no row behind. `build_passages` is
the one code path for import and reindex, so a reindexed source is exactly
what a fresh import of the same bytes would be.
"""
from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session
from tqdm.auto import tqdm

from ..search.classes import CANON, CLASS_LABELS
from ..store.knowledge_tables import KnowledgeEmbeddingRow, KnowledgePassageRow, KnowledgeSourceRow
from ..store.models import utcnow
from .chunking import CHUNKING_VERSION, PARSER_VERSION, chunk, digest
from .intake import (
    MAX_PASSAGES_PER_SOURCE,
    MAX_SOURCES_PER_CAMPAIGN,
    accept,
    check_class,
    check_visibility,
)
from .refusals import KnowledgeRefused

__all__ = ["add_source", "build_passages"]

MAX_TITLE = 200
# Progress bars are shown only when there is enough work to watch.
_PROGRESS_MIN = 50


def _check_room(session: Session, campaign_id: int) -> None:
    held = session.scalar(select(func.count()).where(KnowledgeSourceRow.campaign_id == campaign_id)) or 0
    if held >= MAX_SOURCES_PER_CAMPAIGN:
        raise KnowledgeRefused(
            f"This campaign has reached its limit of {MAX_SOURCES_PER_CAMPAIGN} knowledge sources (it holds "
            f"{held}). Delete one before importing another."
        )


def _check_duplicate(session: Session, campaign_id: int, content_hash: str) -> None:
    twin = session.scalars(
        select(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == campaign_id,
                                         KnowledgeSourceRow.content_hash == content_hash)
    ).first()
    if twin is not None:
        raise KnowledgeRefused(
            f"“{twin.title}” ({CLASS_LABELS.get(twin.classification, twin.classification)}) in this campaign "
            "already has exactly this text. Pass allow_duplicate=True to keep a second copy, for example under "
            "another class.",
            conflict={"source_id": twin.id, "title": twin.title, "classification": twin.classification,
                      "content_hash": twin.content_hash},
        )


def add_source(session: Session, campaign_id: int, name: str, raw: bytes, *, classification: str = "reference",
               title: str | None = None, notes: str = "", visibility: str = "normal",
               always_include: bool = False, allow_duplicate: bool = False,
               progress: bool = False, found: dict | None = None) -> KnowledgeSourceRow:
    """Check, then store one file and its passages. Never commits.

    `found`, if given, receives what was learnt on the way in that the row
    does not hold: the encoding the bytes were read in.
    """
    classification = check_class(classification)
    visibility = check_visibility(visibility)
    accepted = accept(name, raw)
    _check_room(session, campaign_id)
    content_hash = digest(accepted.text)
    if not allow_duplicate:
        _check_duplicate(session, campaign_id, content_hash)
    now = utcnow()
    source = KnowledgeSourceRow(
        campaign_id=campaign_id,
        title=((title or "").strip() or accepted.title)[:MAX_TITLE],
        original_filename=accepted.filename,
        classification=classification,
        enabled=True,
        visibility=visibility,
        # Always-include bypasses relevance; only Canon may, because unranked
        # Reference or Inspiration in every prompt spends budget on material
        # that establishes nothing.
        always_include=bool(always_include) and classification == CANON,
        content_hash=content_hash,
        content=accepted.text,
        byte_size=accepted.byte_size,
        media_type=accepted.media_type,
        parser_version=PARSER_VERSION,
        chunking_version=CHUNKING_VERSION,
        index_state="pending",
        notes=notes or "",
        imported_at=now,
        updated_at=now,
    )
    session.add(source)
    session.flush()
    build_passages(session, source, progress=progress)
    if accepted.encoding != "utf-8":
        source.index_detail = (f"Read as {accepted.encoding} (detected: the file is not UTF-8); "
                               "the text is stored as Unicode.")
    if found is not None:
        found["encoding"] = accepted.encoding
    return source


def build_passages(session: Session, source: KnowledgeSourceRow, *, progress: bool = False) -> int:
    """Replace a source's passages with a fresh chunking of its content.

    Vectors survive a rebuild when a passage comes back identical (same
    heading and text, so the same embedded string): a lexical reindex then
    costs no re-embedding.
    """
    passages = chunk(source.content, markdown=source.media_type == "text/markdown", progress=progress)
    if not passages:
        raise KnowledgeRefused(f"“{source.original_filename}” has no text to index once blank lines are removed.")
    if len(passages) > MAX_PASSAGES_PER_SOURCE:
        raise KnowledgeRefused(
            f"“{source.original_filename}” splits into {len(passages)} passages, past the limit of "
            f"{MAX_PASSAGES_PER_SOURCE}. Split the file and import the parts."
        )
    kept = _vectors_by_hash(session, source.id)
    session.execute(delete(KnowledgePassageRow).where(KnowledgePassageRow.source_id == source.id))
    now = utcnow()
    rows = [
        KnowledgePassageRow(source_id=source.id, campaign_id=source.campaign_id, position=p.index,
                            heading=p.heading, text=p.text, token_count=p.tokens, content_hash=p.content_hash,
                            created_at=now)
        for p in tqdm(passages, desc=f"indexing {source.original_filename}", unit="passage", leave=False,
                      disable=not progress or len(passages) < _PROGRESS_MIN)
    ]
    session.add_all(rows)
    session.flush()
    session.add_all(
        KnowledgeEmbeddingRow(passage_id=row.id, source_id=source.id, campaign_id=source.campaign_id, model=model,
                              dimensions=dims,
                              vector=vector, chunking_version=CHUNKING_VERSION, created_at=now)
        for row in rows if row.content_hash in kept
        for model, dims, vector in [kept[row.content_hash]]
    )
    source.parser_version, source.chunking_version = PARSER_VERSION, CHUNKING_VERSION
    source.index_state, source.index_detail, source.updated_at = "ready", "", now
    return len(rows)


def _vectors_by_hash(session: Session, source_id: int) -> dict[str, tuple[str, int, bytes]]:
    rows = session.execute(
        select(KnowledgePassageRow.content_hash, KnowledgeEmbeddingRow.model, KnowledgeEmbeddingRow.dimensions,
               KnowledgeEmbeddingRow.vector)
        .join(KnowledgeEmbeddingRow, KnowledgeEmbeddingRow.passage_id == KnowledgePassageRow.id)
        .where(KnowledgePassageRow.source_id == source_id)
    )
    return {h: (m, d, v) for h, m, d, v in rows}
