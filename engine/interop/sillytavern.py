"""SillyTavern World Info (lorebooks), as story cards or as one knowledge source.

The entries are read by `worldinfo`, which the character-card, NovelAI and
AI Dungeon readers share; this module only recognises the file and names it.
"""
from __future__ import annotations

from typing import Any

from ..bundle.plan import Notes, Plan
from .detect import SILLYTAVERN
from .ledger import Macros
from .worldinfo import FORMAT_NAME, book_parts, book_plan, entries_of, refuse_unless

__all__ = ["FORMAT_NAME", "read_sillytavern"]


def read_sillytavern(data: Any, *, as_knowledge: bool = False, attach: bool = False, fallback_title: str = "",
                     classification: str = "reference", protagonist: str | None = None,
                     character: str | None = None, checked: bool = False) -> Plan:
    """A new campaign holding the book (or, with `attach`, only what to add); pure.
    `protagonist` and `character` are the names {{user}} and {{char}} stand for."""
    if not checked:
        refuse_unless(data, SILLYTAVERN, "SillyTavern World Info")
    notes, macros = Notes(), Macros(user=protagonist, char=character)
    name, entries = entries_of(data, notes, macros)
    name = name or fallback_title or "World Info"
    macros.report(notes)
    knowledge, cards = book_parts(name, entries, as_knowledge, classification, notes, origin=f"{FORMAT_NAME}: {name}")
    return book_plan(FORMAT_NAME, name, knowledge, cards, notes, attach)
