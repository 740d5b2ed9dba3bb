"""The knowledge tables: their migration step (SQL) and their ORM mapping.

Kept beside each other so the parity test in tests/store/test_migrations.py
can hold them together.

Three mapped tables and one FTS5 index:
- `knowledge_sources`: the imported file as decoded (authoritative) and the
  reader's judgement of it (class, enabled, visibility, always-include).
- `knowledge_passages`: what the chunker made of it (derived, rebuildable).
- `knowledge_embeddings`: one vector per passage with the model that made it
  (derived; its own table so "re-embed everything" is one DELETE).
- `knowledge_fts`: the lexical index, kept in step with the passages by
  triggers, so no code path can add or delete a passage and forget the index
  (a campaign's cascade delete included, which no application code sees).

Passage and embedding ids are AUTOINCREMENT: an id is never reused, so an
index row or a cached vector can never be mistaken for a newer passage that
happens to get the same number (the reference's M9 orphan-row failure).
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["FTS_TABLE", "KnowledgeEmbeddingRow", "KnowledgePassageRow", "KnowledgeSourceRow", "KnowledgeStageVectorRow",
           "migrate", "migrate_stage_vectors"]

FTS_TABLE = "knowledge_fts"

_SCHEMA = (
    """
    CREATE TABLE knowledge_sources (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        title VARCHAR(200) NOT NULL,
        original_filename VARCHAR(255) NOT NULL,
        classification VARCHAR(20) NOT NULL DEFAULT 'reference',
        enabled BOOLEAN NOT NULL DEFAULT 1,
        visibility VARCHAR(20) NOT NULL DEFAULT 'normal',
        always_include BOOLEAN NOT NULL DEFAULT 0,
        content_hash VARCHAR(64) NOT NULL,
        content TEXT NOT NULL,
        byte_size INTEGER NOT NULL,
        media_type VARCHAR(40) NOT NULL,
        parser_version INTEGER NOT NULL,
        chunking_version INTEGER NOT NULL,
        index_state VARCHAR(20) NOT NULL DEFAULT 'pending',
        index_detail TEXT NOT NULL DEFAULT '',
        embed_state VARCHAR(20) NOT NULL DEFAULT 'idle',
        embed_detail TEXT NOT NULL DEFAULT '',
        notes TEXT NOT NULL DEFAULT '',
        imported_at DATETIME NOT NULL,
        updated_at DATETIME NOT NULL
    )
    """,
    "CREATE INDEX ix_knowledge_sources_campaign ON knowledge_sources (campaign_id)",
    "CREATE INDEX ix_knowledge_sources_hash ON knowledge_sources (campaign_id, content_hash)",
    """
    CREATE TABLE knowledge_passages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        source_id INTEGER NOT NULL REFERENCES knowledge_sources(id) ON DELETE CASCADE,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        token_count INTEGER NOT NULL,
        content_hash VARCHAR(64) NOT NULL,
        created_at DATETIME NOT NULL,
        CONSTRAINT ux_knowledge_passages_position UNIQUE (source_id, position)
    )
    """,
    # Covering for "how many passages does the campaign have in live sources"
    # without reading the (large) passage rows.
    "CREATE INDEX ix_knowledge_passages_campaign ON knowledge_passages (campaign_id, source_id)",
    """
    CREATE TABLE knowledge_embeddings (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        passage_id INTEGER NOT NULL UNIQUE REFERENCES knowledge_passages(id) ON DELETE CASCADE,
        source_id INTEGER NOT NULL REFERENCES knowledge_sources(id) ON DELETE CASCADE,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        model VARCHAR(200) NOT NULL,
        dimensions INTEGER NOT NULL,
        vector BLOB NOT NULL,
        chunking_version INTEGER NOT NULL,
        created_at DATETIME NOT NULL
    )
    """,
    # Covering for the per-turn vector-cache check (count and newest id: 0.2 ms
    # at 4,000 vectors) and for the catalogue read when it changed: both come
    # from the index alone, never from the rows that carry the 1.5-3 kB
    # vectors (a join through those rows measured 6.5 ms).
    "CREATE INDEX ix_knowledge_embeddings_catalogue ON knowledge_embeddings "
    "(campaign_id, model, source_id, passage_id)",
    # Porter stemming: readers write "resurrecting" where the file says
    # "resurrection"; plain unicode61 missed that ordinary case. It strips only
    # English suffixes, so invented names (Westhaven, Mara) pass unchanged.
    # No external-content mode: its deletes need the old text exactly, and a
    # mismatch corrupts the index silently; a duplicate of <= 1 MiB per source
    # buys a plain DELETE.
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(text, tokenize='porter unicode61')",
    f"""
    CREATE TRIGGER knowledge_passages_fts_insert AFTER INSERT ON knowledge_passages BEGIN
        INSERT OR REPLACE INTO {FTS_TABLE} (rowid, text)
        VALUES (new.id, CASE WHEN new.heading = '' THEN new.text ELSE new.heading || char(10) || new.text END);
    END
    """,
    f"""
    CREATE TRIGGER knowledge_passages_fts_update AFTER UPDATE OF heading, text ON knowledge_passages BEGIN
        INSERT OR REPLACE INTO {FTS_TABLE} (rowid, text)
        VALUES (new.id, CASE WHEN new.heading = '' THEN new.text ELSE new.heading || char(10) || new.text END);
    END
    """,
    f"""
    CREATE TRIGGER knowledge_passages_fts_delete AFTER DELETE ON knowledge_passages BEGIN
        DELETE FROM {FTS_TABLE} WHERE rowid = old.id;
    END
    """,
)


def migrate(db: Connection) -> None:
    """Creates the knowledge tables, the lexical index and the triggers that
    keep the index equal to the passages. One statement at a time, inside the
    caller's transaction (a trigger body holds semicolons, so no splitting)."""
    for statement in _SCHEMA:
        db.execute(statement)


_STAGE_VECTORS = (
    """
    CREATE TABLE knowledge_stage_vectors (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model VARCHAR(200) NOT NULL,
        content_hash VARCHAR(64) NOT NULL,
        dimensions INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at DATETIME NOT NULL,
        CONSTRAINT ux_knowledge_stage_vectors UNIQUE (model, content_hash)
    )
    """,
    # The pending query and a turn's candidate lookup go from a passage's
    # hash to its vector; this finds the passages of a hash the other way.
    "CREATE INDEX ix_knowledge_passages_hash ON knowledge_passages (content_hash)",
)


def migrate_stage_vectors(db: Connection) -> None:
    """Second-stage passage vectors (engine.search.stage_vectors), keyed by
    model and passage content hash rather than by passage row: every campaign
    of the file whose source yields the same passage (same heading trail and
    text) shares one vector, and a reindex that gives a passage back unchanged
    keeps it. Frozen SQL, as every migration step."""
    for statement in _STAGE_VECTORS:
        db.execute(statement)


class KnowledgeSourceRow(Base):
    """One imported file. `content` is the text as decoded (shown and
    exported); the passages, index and vectors are derived from it."""

    __tablename__ = "knowledge_sources"
    __table_args__ = (
        Index("ix_knowledge_sources_campaign", "campaign_id"),
        Index("ix_knowledge_sources_hash", "campaign_id", "content_hash"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(200))
    original_filename: Mapped[str] = mapped_column(String(255))
    classification: Mapped[str] = mapped_column(String(20), default="reference")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    visibility: Mapped[str] = mapped_column(String(20), default="normal")
    always_include: Mapped[bool] = mapped_column(Boolean, default=False)
    content_hash: Mapped[str] = mapped_column(String(64))  # SHA-256 of the normalised text
    content: Mapped[str] = mapped_column(Text, deferred=True)  # a listing never loads 1 MiB
    byte_size: Mapped[int] = mapped_column(Integer)
    media_type: Mapped[str] = mapped_column(String(40))
    parser_version: Mapped[int] = mapped_column(Integer)
    chunking_version: Mapped[int] = mapped_column(Integer)
    # pending | ready | failed: retrieval reads only `ready`, so a half-built
    # index is inert rather than wrong.
    index_state: Mapped[str] = mapped_column(String(20), default="pending")
    index_detail: Mapped[str] = mapped_column(Text, default="")
    # idle | pending | ok | failed
    embed_state: Mapped[str] = mapped_column(String(20), default="idle")
    embed_detail: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    imported_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KnowledgePassageRow(Base):
    """One passage of a source. `campaign_id` is copied from the source so
    the index joins reach campaign scope without a third table."""

    __tablename__ = "knowledge_passages"
    __table_args__ = (
        UniqueConstraint("source_id", "position", name="ux_knowledge_passages_position"),
        Index("ix_knowledge_passages_campaign", "campaign_id", "source_id"),
        Index("ix_knowledge_passages_hash", "content_hash"),  # v11
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("knowledge_sources.id", ondelete="CASCADE"))
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # 0-based; shown as "passage position+1"
    heading: Mapped[str] = mapped_column(Text, default="")  # "Setting > Westhaven"
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KnowledgeEmbeddingRow(Base):
    """A passage's vector: little-endian float32 bytes, with the model that
    made it. The model is the staleness test: a same-width vector from another
    model would score plausible nonsense, so it is never compared."""

    __tablename__ = "knowledge_embeddings"
    __table_args__ = (
        Index("ix_knowledge_embeddings_catalogue", "campaign_id", "model", "source_id", "passage_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    passage_id: Mapped[int] = mapped_column(
        ForeignKey("knowledge_passages.id", ondelete="CASCADE"), unique=True
    )
    # Copied from the passage so the catalogue reaches the source's enabled
    # flag without reading passage rows.
    source_id: Mapped[int] = mapped_column(ForeignKey("knowledge_sources.id", ondelete="CASCADE"))
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(200))
    dimensions: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    chunking_version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KnowledgeStageVectorRow(Base):
    """A second-stage vector: one per (model, passage content hash), shared by
    every campaign whose passages hash the same. Derived: deleting them all
    only makes the second stage compute them again."""

    __tablename__ = "knowledge_stage_vectors"
    __table_args__ = (
        UniqueConstraint("model", "content_hash", name="ux_knowledge_stage_vectors"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    content_hash: Mapped[str] = mapped_column(String(64))
    dimensions: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
