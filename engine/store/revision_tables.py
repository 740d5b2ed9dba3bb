"""Revisions of a passage: the text a node had before each in-place change.

A passage edited where it stands (or continued by the narrator) keeps its id
and its place in the story, so everything after it stays; the text it had
before is kept here, one row per change, and can be brought back. `text` is
always the text that was replaced; the node holds the current one.
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["NodeRevisionRow", "migrate"]

_DDL = [
    """CREATE TABLE node_revisions (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        node_id INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
        text TEXT NOT NULL DEFAULT '',
        reason VARCHAR(20) NOT NULL DEFAULT 'edit',
        record JSON,
        created_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_node_revisions_node ON node_revisions (node_id)",
]


def migrate(db: Connection) -> None:
    for statement in _DDL:
        db.execute(statement)


class NodeRevisionRow(Base):
    __tablename__ = "node_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text, default="")
    # "edit" (the reader's), "continued" (the narrator wrote on), "restored" (an older text brought back)
    reason: Mapped[str] = mapped_column(String(20), default="edit")
    # The turn record the node had before a continuation replaced it (what the
    # narrator was shown for the earlier part), so no measurement is lost.
    record: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
