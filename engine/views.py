"""Plain, immutable views of the story handed to notebooks and widgets.

Views are detached from the database: holding one never holds a session,
and each displays itself in a notebook.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from . import display
from .context import Report

__all__ = ["Entry", "SavePoint", "Turn"]


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
class Turn:
    """One narration and what it was given: the result of act, retry, edit..."""

    id: int
    text: str
    depth: int
    input: str | None = None
    reasoning: str | None = None
    take: int = 1
    takes: int = 1
    narrator: str = ""
    usage: dict = field(default_factory=dict)
    accounting: dict = field(default_factory=dict)
    window: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    # Reads the report when first asked for: rebuilding the exact prompt reads
    # the history it refers to, which a turn that is only played never needs.
    load_report: Callable[[], dict] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def report(self) -> Report:
        """What the narrator was shown (engine.turns.record), the exact prompt included."""
        return self.load_report() if self.load_report is not None else Report()

    def _repr_html_(self) -> str:
        return display.turn_html(self)


@dataclass(frozen=True)
class SavePoint:
    id: int
    name: str
    note: str
    depth: int
    created_at: datetime

    def _repr_html_(self) -> str:
        return display.save_point_html(self)
