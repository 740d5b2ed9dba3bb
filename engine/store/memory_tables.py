"""The memory tables: memories, summaries and the derived-work status.

Memories and summaries carry a story coordinate (branch, depth): whether one
applies is decided by the lineage clause, exactly like a story node, so a
fork sees its ancestors' memories and an Undo makes later ones ineligible
without deleting anything.
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection

from sqlalchemy import Boolean, DateTime, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["migrate", "migrate_active_indexes", "migrate_text_vectors", "MemoryRow", "SummaryRow", "DerivedStatusRow",
           "TextVectorRow"]

_DDL = [
    """CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        text TEXT NOT NULL DEFAULT '',
        branch_id INTEGER REFERENCES branches(id) ON DELETE CASCADE,
        depth INTEGER,
        source_start INTEGER,
        source_end INTEGER,
        authority VARCHAR(20) NOT NULL DEFAULT 'accepted_story',
        pinned BOOLEAN NOT NULL DEFAULT 0,
        forgotten BOOLEAN NOT NULL DEFAULT 0,
        use_count INTEGER NOT NULL DEFAULT 0,
        last_used_at DATETIME,
        vector BLOB,
        vector_model VARCHAR(200) NOT NULL DEFAULT '',
        created_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_memories_campaign ON memories (campaign_id)",
    "CREATE INDEX ix_memories_coordinate ON memories (branch_id, depth)",
    """CREATE TABLE summaries (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        text TEXT NOT NULL DEFAULT '',
        branch_id INTEGER REFERENCES branches(id) ON DELETE CASCADE,
        depth INTEGER,
        source_start INTEGER,
        source_end INTEGER,
        "trigger" VARCHAR(20) NOT NULL DEFAULT 'interval',
        model_name VARCHAR(200) NOT NULL DEFAULT '',
        created_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_summaries_campaign ON summaries (campaign_id, depth)",
    """CREATE TABLE derived_status (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        kind VARCHAR(20) NOT NULL,
        status VARCHAR(20) NOT NULL DEFAULT 'idle',
        detail TEXT NOT NULL DEFAULT '',
        failures INTEGER NOT NULL DEFAULT 0,
        last_attempt_at DATETIME,
        last_success_at DATETIME,
        CONSTRAINT uq_derived_kind UNIQUE (campaign_id, kind)
    )""",
]


def migrate(db: Connection) -> None:
    for statement in _DDL:
        db.execute(statement)


def migrate_active_indexes(db: Connection) -> None:
    """Indexes that let a turn read only the memories still in play, and the summary at the head.

    Forgotten memories are kept for display, so a 10,000-turn campaign holds
    3,333 memories of which at most `memory_capacity` (200) are active; the
    recall catalogue, the embedding backlog and eviction scanned all of them
    (measured 14 ms per turn at 10,000 turns, most of a turn's growth)."""
    db.execute("CREATE INDEX ix_memories_active ON memories (campaign_id, forgotten)")
    db.execute("CREATE INDEX ix_memories_active_coordinate ON memories (branch_id, forgotten, depth)")
    # The summary valid at the head is found through the lineage clause,
    # which names branches, not the campaign: without this it read every summary.
    db.execute("CREATE INDEX ix_summaries_coordinate ON summaries (branch_id, depth)")


def migrate_text_vectors(db: Connection) -> None:
    """Vectors of story lines and summaries, keyed by their text's content hash
    and the model: a line is a story node on the path, read from the node
    table itself, so Undo, retry and forks need nothing here; an edit makes a
    new text, hence a new hash and a new vector, and an identical text (a
    revision brought back) finds its vector again."""
    db.execute("""CREATE TABLE text_vectors (
        hash VARCHAR(32) NOT NULL,
        model VARCHAR(200) NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (hash, model)
    )""")


class Anchored:
    """Text written from a stretch of story, anchored at the node the stretch ends on."""

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text, default="")
    branch_id: Mapped[int | None] = mapped_column(ForeignKey("branches.id", ondelete="CASCADE"), nullable=True)
    depth: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source_start: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source_end: Mapped[int | None] = mapped_column(Integer, nullable=True)


class MemoryRow(Anchored, Base):
    __tablename__ = "memories"

    authority: Mapped[str] = mapped_column(String(20), default="accepted_story")
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    forgotten: Mapped[bool] = mapped_column(Boolean, default=False)
    use_count: Mapped[int] = mapped_column(Integer, default=0)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    vector: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    vector_model: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class SummaryRow(Anchored, Base):
    __tablename__ = "summaries"

    trigger: Mapped[str] = mapped_column(String(20), default="interval")
    model_name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TextVectorRow(Base):
    __tablename__ = "text_vectors"

    hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    model: Mapped[str] = mapped_column(String(200), primary_key=True)
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class DerivedStatusRow(Base):
    __tablename__ = "derived_status"
    __table_args__ = (UniqueConstraint("campaign_id", "kind", name="uq_derived_kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default="idle")
    detail: Mapped[str] = mapped_column(Text, default="")
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_attempt_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_success_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
