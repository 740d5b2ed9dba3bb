"""The media table: one visual profile per entity of a campaign.

A profile is how a character, place, item or anything else should look when
a scene is handed to an image or video model: traits with their values,
short feature phrases and free style notes. It belongs to the campaign, not
to a place in the story: it is not narrative state, has no event, no
snapshot and no branch, so Undo, Redo, a restore or a new branch never
change it. One table for every entity type, keyed by the state's entity key
(not a display name, which two entities may share).
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["VisualProfileRow", "migrate"]

_DDL = [
    """CREATE TABLE visual_profiles (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        entity_key VARCHAR(200) NOT NULL,
        descriptors JSON NOT NULL DEFAULT '{}',
        features JSON NOT NULL DEFAULT '[]',
        style_notes TEXT NOT NULL DEFAULT '',
        created_at DATETIME NOT NULL,
        updated_at DATETIME NOT NULL,
        CONSTRAINT uq_visual_profiles_entity UNIQUE (campaign_id, entity_key)
    )""",
]


def migrate(db: Connection) -> None:
    """The table and its one index (the unique pair, which also serves every
    read by campaign: campaign_id is its leading column)."""
    for statement in _DDL:
        db.execute(statement)


class VisualProfileRow(Base):
    __tablename__ = "visual_profiles"
    __table_args__ = (UniqueConstraint("campaign_id", "entity_key", name="uq_visual_profiles_entity"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    entity_key: Mapped[str] = mapped_column(String(200))
    descriptors: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    features: Mapped[list[Any]] = mapped_column(JSON, default=list)
    style_notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
