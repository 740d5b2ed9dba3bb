"""The narrative tables: every state event ever proposed, and what became of it.

The state itself lives in snapshots (`nodes.state_after`, `campaigns.state`);
this is the audit trail behind them: which turn or correction proposed an
event, whether it was applied, and if not, why.
"""
from __future__ import annotations

from datetime import datetime
from sqlite3 import Connection
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["migrate", "StateEventRow"]

_DDL = [
    """CREATE TABLE state_events (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
        node_id INTEGER REFERENCES nodes(id) ON DELETE CASCADE,
        source VARCHAR(20) NOT NULL,
        event JSON NOT NULL DEFAULT '{}',
        accepted BOOLEAN NOT NULL DEFAULT 1,
        reason TEXT NOT NULL DEFAULT '',
        note TEXT NOT NULL DEFAULT '',
        created_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_state_events_campaign ON state_events (campaign_id)",
    "CREATE INDEX ix_state_events_node ON state_events (node_id)",
]


def migrate(db: Connection) -> None:
    for statement in _DDL:
        db.execute(statement)


class StateEventRow(Base):
    __tablename__ = "state_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), nullable=True)
    source: Mapped[str] = mapped_column(String(20))
    event: Mapped[Any] = mapped_column(JSON, default=dict)
    accepted: Mapped[bool] = mapped_column(Boolean, default=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
