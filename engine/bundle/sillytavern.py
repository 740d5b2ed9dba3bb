"""SillyTavern World Info (lorebooks), as story cards or as one knowledge source.

Both the World Info file (`entries` keyed by number, `key`/`keysecondary`/
`comment`/`content`/`disable`) and a character card's embedded book
(`entries` as a list, `keys`/`secondary_keys`/`name`/`enabled`) are read.

As cards, every entry is kept (a disabled one says so in its notes). As
knowledge, the enabled entries become one Markdown source with a section per
entry, so the library retrieves them by what the scene is about instead of
by keyword. SillyTavern's activation settings (constant, selective logic,
order, position, depth, probability, groups...) decide nothing here and are
listed as not carried.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..knowledge.intake import safe_filename
from .errors import BundleRefused
from .library import card_keys, read_cards, read_knowledge
from .native import read_v1
from .plan import Notes, Plan

__all__ = ["FORMAT_NAME", "Entry", "entries_of", "markdown", "read_sillytavern"]

FORMAT_NAME = "SillyTavern World Info"
_ACTIVATION = ("constant", "selective", "selectiveLogic", "order", "insertion_order", "position", "depth",
               "probability", "useProbability", "group", "groupOverride", "groupWeight", "scanDepth",
               "caseSensitive", "matchWholeWords", "excludeRecursion", "preventRecursion", "delayUntilRecursion",
               "vectorized", "sticky", "cooldown", "delay", "role", "automationId")


@dataclass(frozen=True)
class Entry:
    title: str
    keys: list[str]
    secondary: list[str]
    content: str
    enabled: bool


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def entries_of(data: Any, notes: Notes) -> tuple[str, list[Entry]]:
    """(the book's name, its entries in SillyTavern's display order)."""
    if isinstance(data, dict) and isinstance(data.get("character_book"), dict):
        data = data["character_book"]
    raw = data.get("entries") if isinstance(data, dict) else None
    if isinstance(raw, dict):
        rows = sorted(raw.values(), key=_position) if all(isinstance(r, dict) for r in raw.values()) else None
    elif isinstance(raw, list):
        rows = raw
    else:
        rows = None
    if rows is None:
        raise BundleRefused("This is not SillyTavern World Info: it has no `entries`. Nothing was imported.")
    out = []
    for row in rows:
        if not isinstance(row, dict):
            notes.drop("a World Info entry that was not an object was dropped")
            continue
        for key in _ACTIVATION:
            if key in row:
                notes.lose("activation settings (constant, order, position, depth, probability, groups and the "
                           "like): relevance is decided by the scene here, not by keywords")
                break
        out.append(_entry(row))
    return _text(data.get("name")).strip(), out


def _position(row: dict) -> tuple:
    for key in ("displayIndex", "uid", "id"):
        if isinstance(row.get(key), int):
            return (row[key],)
    return (0,)


def _entry(row: dict) -> Entry:
    keys = card_keys(row.get("key", row.get("keys")))
    enabled = not row.get("disable", False) and row.get("enabled", True) is not False
    title = _text(row.get("comment")).strip() or _text(row.get("name")).strip() or (keys[0] if keys else "")
    return Entry(title=title, keys=keys, secondary=card_keys(row.get("keysecondary", row.get("secondary_keys"))),
                 content=_text(row.get("content")), enabled=enabled)


def markdown(name: str, entries: list[Entry]) -> str:
    """The entries as one Markdown document: a section per entry, keys first."""
    parts = [f"# {name}"]
    for e in entries:
        parts.append(f"## {e.title or 'Untitled entry'}")
        if e.keys or e.secondary:
            parts.append("Keys: " + ", ".join(e.keys + e.secondary))
        parts.append(e.content.strip())
    return "\n\n".join(parts) + "\n"


def read_sillytavern(data: Any, *, as_knowledge: bool = False, attach: bool = False, fallback_title: str = "",
                     classification: str = "reference") -> Plan:
    """A new campaign holding the book (or, with `attach`, only what to add); pure."""
    notes = Notes()
    name, entries = entries_of(data, notes)
    name = name or fallback_title or "World Info"
    if as_knowledge:
        knowledge = _as_source(name, entries, classification, notes)
        cards = []
    else:
        knowledge = []
        cards = read_cards([_as_card(e) for e in entries], notes)
        if cards:
            notes.warnings.append("Story cards are kept with the campaign for reference; the narrator does not "
                                  "read them. Import with as_knowledge=True to have the entries retrieved.")
    if attach:
        return Plan(format=FORMAT_NAME, campaign=None, knowledge=knowledge, cards=cards, notes=notes)
    plan = read_v1({"campaign": {"title": name}, "branches": [{"id": 1, "parent": None}], "nodes": []},
                   format_name=FORMAT_NAME)
    plan.knowledge, plan.cards = knowledge, cards
    plan.notes.merge(notes)
    return plan


def _as_card(e: Entry) -> dict:
    notes = []
    if e.secondary:
        notes.append("Secondary keys: " + ", ".join(e.secondary))
    if not e.enabled:
        notes.append("Disabled in SillyTavern.")
    return {"title": e.title, "keys": e.keys, "entry": e.content, "card_type": "world info", "notes": "\n".join(notes)}


def _as_source(name: str, entries: list[Entry], classification: str, notes: Notes) -> list:
    kept = []
    for e in entries:
        if e.enabled and e.content.strip():
            kept.append(e)
        else:
            notes.drop(f"World Info entry “{e.title or '(untitled)'}” was left out of the knowledge source "
                       + ("(disabled in SillyTavern)" if not e.enabled else "(it has no text)"))
    if not kept:
        raise BundleRefused("The World Info has no enabled entries with text to make a knowledge source from. "
                            "Nothing was imported.")
    filename = safe_filename(f"{name}.md")
    if not filename.lower().endswith(".md"):
        filename += ".md"
    return read_knowledge([{"title": name, "original_filename": filename, "classification": classification,
                            "content": markdown(name, kept), "media_type": "text/markdown",
                            "notes": f"From SillyTavern World Info: {len(kept)} entries."}], notes)
