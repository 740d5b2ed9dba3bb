"""The story-card table: AI Dungeon style cards kept with a campaign.

Cards arrive from AI Dungeon scenarios and SillyTavern World Info (or by
hand) and travel in campaign bundles. The narrator does not read them: a
card's keyword trigger is exactly the relevance-without-evidence that the
knowledge library replaced, so they are kept as the reader's reference and
can be turned into a knowledge source when wanted.
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["StoryCardRow", "migrate"]

_DDL = [
    """CREATE TABLE story_cards (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        title VARCHAR(200) NOT NULL DEFAULT '',
        keys JSON NOT NULL DEFAULT '[]',
        entry TEXT NOT NULL DEFAULT '',
        card_type VARCHAR(40) NOT NULL DEFAULT '',
        notes TEXT NOT NULL DEFAULT '',
        created_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_story_cards_campaign ON story_cards (campaign_id)",
]


def migrate(db: Connection) -> None:
    """One statement at a time, inside the caller's transaction."""
    for statement in _DDL:
        db.execute(statement)


class StoryCardRow(Base):
    __tablename__ = "story_cards"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(200), default="")
    # The words that would have triggered the card, as a JSON list of strings.
    keys: Mapped[list[Any]] = mapped_column(JSON, default=list)
    entry: Mapped[str] = mapped_column(Text, default="")
    card_type: Mapped[str] = mapped_column(String(40), default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
