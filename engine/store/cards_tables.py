"""The story-card table: keyword-triggered lore kept with a campaign.

Cards arrive from AI Dungeon, SillyTavern, character cards, NovelAI and
KoboldAI files (or by hand) and travel in campaign bundles. In every one of
those tools a card is live lore: it enters the prompt when one of its keys
appears in the recent story, and a `constant` card always does. Here the
same holds (see `engine.cards`), ranked with the knowledge library under its
budget rather than injected on top of it.
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["StoryCardRow", "migrate", "migrate_secondary", "migrate_triggering"]

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

# What triggering needs and the first table lacked: an always-on flag (every
# peer has one: SillyTavern `constant`, NovelAI `forceActivation`, KoboldAI
# `constant`), an off switch (disabled entries are kept, never fired), and
# where the card came from, for the turn report's provenance.
_TRIGGERING = [
    "ALTER TABLE story_cards ADD COLUMN constant BOOLEAN NOT NULL DEFAULT 0",
    "ALTER TABLE story_cards ADD COLUMN enabled BOOLEAN NOT NULL DEFAULT 1",
    "ALTER TABLE story_cards ADD COLUMN origin VARCHAR(200) NOT NULL DEFAULT ''",
]


# Secondary keys and the logic that combines them (SillyTavern's selective
# entries, RisuAI's `secondkey`): a card fires only when its logic holds.
_SECONDARY = [
    "ALTER TABLE story_cards ADD COLUMN secondary_keys JSON NOT NULL DEFAULT '[]'",
    "ALTER TABLE story_cards ADD COLUMN logic VARCHAR(10) NOT NULL DEFAULT 'and_any'",
]


def migrate(db: Connection) -> None:
    """One statement at a time, inside the caller's transaction."""
    for statement in _DDL:
        db.execute(statement)


def migrate_triggering(db: Connection) -> None:
    """Cards become live lore: constant, enabled and origin columns."""
    for statement in _TRIGGERING:
        db.execute(statement)


def migrate_secondary(db: Connection) -> None:
    """Secondary keys and their logic on story cards."""
    for statement in _SECONDARY:
        db.execute(statement)


class StoryCardRow(Base):
    __tablename__ = "story_cards"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(200), default="")
    # The words that trigger the card, as a JSON list of strings.
    keys: Mapped[list[Any]] = mapped_column(JSON, default=list)
    entry: Mapped[str] = mapped_column(Text, default="")
    card_type: Mapped[str] = mapped_column(String(40), default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    constant: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    origin: Mapped[str] = mapped_column(String(200), default="")
    # Keys that narrow the card, and how: "and_any", "not_all", "not_any", "and_all" (engine.cards.LOGICS).
    secondary_keys: Mapped[list[Any]] = mapped_column(JSON, default=list)
    logic: Mapped[str] = mapped_column(String(10), default="and_any")
