"""The ORM classes, mapped onto the schema that `migrations` creates.

The schema itself is written as SQL in `migrations.py`; these classes only map
it. `tests/store/test_migrations.py` checks that the two agree column for
column, so a fresh file and an upgraded one can never differ.
"""
from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class PackedJSON(TypeDecorator):
    """JSON to Python and back, kept in the file as zlib-compressed JSON.

    For turn reports: measured on a 1,000-turn campaign, a v3 report of
    5,436 bytes of JSON packs to 1,886. Values written before (JSON text) still
    read, so old rows need no rewrite. The `Text` impl adds no processing of
    its own, so the driver hands back bytes for packed rows and str for old ones."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        return zlib.compress(json.dumps(value, separators=(",", ":")).encode("utf-8"), 6)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if isinstance(value, (bytes, memoryview)):
            return json.loads(zlib.decompress(bytes(value)))
        return json.loads(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class CampaignRow(Base):
    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    premise: Mapped[str] = mapped_column(Text, default="")
    protagonist: Mapped[str] = mapped_column(String(200), default="")
    ai_instructions: Mapped[str] = mapped_column(Text, default="")
    authors_note: Mapped[str] = mapped_column(Text, default="")
    narration_length: Mapped[str] = mapped_column(String(20), default="")
    canon: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The authoritative narrative state at the head; every head move rewrites
    # it from the snapshot of the node it lands on.
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    head_branch_id: Mapped[int | None] = mapped_column(
        ForeignKey("branches.id", ondelete="SET NULL"), nullable=True
    )
    # -1 means "before the first node", so "the next node is head_depth + 1"
    # needs no special case for an empty campaign.
    head_depth: Mapped[int] = mapped_column(Integer, default=-1)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class BranchRow(Base):
    """A line of the story. It borrows its parent's nodes up to `fork_depth`
    (inclusive) and owns the nodes below that, so a fork costs one row."""

    __tablename__ = "branches"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("branches.id", ondelete="CASCADE"), nullable=True
    )
    fork_depth: Mapped[int] = mapped_column(Integer, default=-1)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class NodeRow(Base):
    """One story node: an opening, a player input, a direction or a narration.

    Takes of one turn are nodes with the same `parent_id` at the same depth;
    `live` marks the take most recently chosen among them.
    """

    __tablename__ = "nodes"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    branch_id: Mapped[int] = mapped_column(ForeignKey("branches.id", ondelete="CASCADE"))
    depth: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("nodes.id", ondelete="SET NULL"), nullable=True
    )
    kind: Mapped[str] = mapped_column(String(20))
    text: Mapped[str] = mapped_column(Text, default="")
    raw_text: Mapped[str] = mapped_column(Text, default="")
    reasoning: Mapped[str | None] = mapped_column(Text, nullable=True)
    live: Mapped[bool] = mapped_column(Boolean, default=True)
    edited: Mapped[bool] = mapped_column(Boolean, default=False)
    # Loaded only when asked for: a 1,000-turn campaign opens without reading
    # every snapshot.
    state_after: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, deferred=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    record: Mapped[TurnRecordRow | None] = relationship(
        back_populates="node", uselist=False, lazy="select"
    )


class TurnRecordRow(Base):
    """What one narrator take was given and what came back: the exact prompt
    and report, usage, accounting, the window, timings. Kept apart from the
    node so reading the story never loads prompts."""

    __tablename__ = "turn_records"

    node_id: Mapped[int] = mapped_column(
        ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True
    )
    narrator: Mapped[str] = mapped_column(String(200), default="")
    report: Mapped[dict[str, Any]] = mapped_column(PackedJSON, default=dict)
    usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    accounting: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    window: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    node: Mapped[NodeRow] = relationship(back_populates="record")


class PromptTextRow(Base):
    """A prompt text kept once per file under its content hash: turn records
    refer to their system block, summaries, memories and passages by it."""

    __tablename__ = "prompt_texts"

    hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    text: Mapped[str] = mapped_column(Text)


class SavePointRow(Base):
    __tablename__ = "save_points"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    note: Mapped[str] = mapped_column(Text, default="")
    branch_id: Mapped[int] = mapped_column(ForeignKey("branches.id"))  # a held branch cannot go
    depth: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class SettingRow(Base):
    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)
