"""Plain, immutable views of the story handed to notebooks and widgets.

Views are detached from the database: holding one never holds a session,
and each displays itself in a notebook. `Turn` is the turn record itself
(engine.turns.record), named here too.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from . import display
from .turns.record import Turn

__all__ = ["Entry", "Revision", "SavePoint", "Turn"]


@dataclass(frozen=True)
class Entry:
    """One node of the story being read."""

    id: int
    kind: str  # start | player | direction | narrator
    text: str
    depth: int
    take: int = 1
    takes: int = 1
    edited: bool = False

    def _repr_html_(self) -> str:
        return display.entries_html([self])


@dataclass(frozen=True)
class Revision:
    """One text a passage has had: `n` counts from 1 (the first text), and
    the last one is `current`. `reason` says what replaced it: "edit",
    "continued" (the narrator wrote on) or "restored"."""

    n: int
    text: str
    current: bool
    reason: str = ""
    replaced_at: datetime | None = None


@dataclass(frozen=True)
class SavePoint:
    id: int
    name: str
    note: str
    depth: int
    created_at: datetime

    def _repr_html_(self) -> str:
        return display.save_point_html(self)
