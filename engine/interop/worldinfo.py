"""World Info books (SillyTavern's, and the books inside cards and other tools' files): entries, cards, sources.

Shared by the readers; not a reader itself.

Read in every shape seen in the wild: the World Info file (`entries` keyed by
number; `key`/`keysecondary`/`comment`/`content`/`disable`/`constant`), a
character card's embedded book (`entries` as a list; `keys`/`secondary_keys`/
`name`/`enabled`), the `{"character_book": ...}` wrapper and the
`lorebook_v3` export. A file of any other format is refused by name.

As cards, every entry is kept and fires as it did in SillyTavern: by its keys,
case-insensitive and whole-word (a `/regex/flags` key as an expression), or
always when `constant`; a selective entry keeps its secondary keys and its
`selectiveLogic` (AND ANY, NOT ALL, NOT ANY, AND ALL); a disabled entry is
kept switched off. As knowledge, the enabled entries become one Markdown
source with a section per entry, retrieved by what the scene is about. Every
other field (order, position, depth, probability, groups...) is listed in
the report with a count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..bundle.errors import BundleRefused
from ..bundle.library import card_keys, read_cards, read_knowledge
from ..bundle.native import read_v1
from ..bundle.plan import Notes, Plan
from ..cards import logic_name
from ..knowledge.chunking import ENTRY_BREAK
from ..knowledge.intake import safe_filename
from .detect import detect
from .ledger import Macros, account

__all__ = ["FORMAT_NAME", "Entry", "book_parts", "book_plan", "entries_of", "markdown", "refuse_unless"]

FORMAT_NAME = "SillyTavern World Info"
# Fields a card here carries, in either dialect.
_CARRIED = {"key", "keys", "keysecondary", "secondary_keys", "comment", "name", "content", "disable", "enabled",
            "constant", "uid", "id", "displayIndex", "selective", "selectiveLogic", "selective_logic", "use_regex"}
_MEANINGS = {
    "order": "insertion order among fired entries (here cards rank with the knowledge library)",
    "insertion_order": "insertion order among fired entries (here cards rank with the knowledge library)",
    "position": "where in the prompt the entry was inserted", "depth": "insertion depth in the chat",
    "probability": "activation probability (here a card fires every time its key appears)",
    "useProbability": "whether the probability applied", "group": "inclusion group",
    "groupOverride": "inclusion group priority", "groupWeight": "inclusion group weight",
    "useGroupScoring": "inclusion group scoring", "scanDepth": "per-entry scan depth",
    "caseSensitive": "case-sensitive keys (here keys are case-insensitive)",
    "matchWholeWords": "whole-word matching (here keys always match whole words)",
    "excludeRecursion": "recursion control", "preventRecursion": "recursion control",
    "delayUntilRecursion": "recursion control", "vectorized": "vector activation", "sticky": "sticky turns",
    "cooldown": "cooldown turns", "delay": "activation delay", "role": "the message role it was sent as",
    "automationId": "a Quick Reply automation", "addMemo": "the editor's memo toggle",
    "extensions": "tool-specific extension data", "priority": "priority among fired entries",
    "case_sensitive": "case-sensitive keys (here keys are case-insensitive)",
    "characterFilter": "which characters the entry applies to", "probability_percent": "activation probability",
    "outletName": "a named outlet", "triggers": "generation types that trigger it",
    "ignoreBudget": "ignoring the World Info budget", "matchPersonaDescription": "extra scan sources",
    "matchCharacterDescription": "extra scan sources", "matchCharacterPersonality": "extra scan sources",
    "matchCharacterDepthPrompt": "extra scan sources", "matchScenario": "extra scan sources",
    "matchCreatorNotes": "extra scan sources",
}
_BOOK_CARRIED = {"entries", "name"}
_BOOK_MEANINGS = {
    "description": "the book's description", "scan_depth": "the book's scan depth",
    "token_budget": "the book's token budget (here cards share the knowledge budget)",
    "recursive_scanning": "recursive scanning", "extensions": "tool-specific extension data",
    "originalData": "SillyTavern's copy of the file it was converted from",
}


@dataclass(frozen=True)
class Entry:
    title: str
    keys: list[str]
    secondary: list[str]
    content: str
    enabled: bool
    constant: bool = False
    selective: bool = True  # the secondary keys narrow the entry (SillyTavern ignores them when off)
    logic: str = "and_any"  # one of engine.cards.LOGICS
    note: str = ""  # what the card's notes should say besides (a RisuAI folder, say)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def refuse_unless(data: Any, wanted: str, importer: str) -> None:
    """Refuse a file that is not `wanted`, naming what it looks like."""
    found = detect(data)
    if found.format != wanted:
        also = (" Use wb.import_file(path), which recognises it." if found.supported else "")
        raise BundleRefused(f"This is not {importer}: it looks like {found.label}.{also} Nothing was imported.")


def _book(data: Any) -> Any:
    if isinstance(data, dict) and data.get("spec") == "lorebook_v3" and isinstance(data.get("data"), dict):
        return data["data"]
    if isinstance(data, dict) and isinstance(data.get("character_book"), dict):
        return data["character_book"]
    return data


def entries_of(data: Any, notes: Notes, macros: Macros | None = None) -> tuple[str, list[Entry]]:
    """(the book's name, its entries in SillyTavern's display order)."""
    data = _book(data)
    raw = data.get("entries") if isinstance(data, dict) else None
    if isinstance(raw, dict):
        rows = sorted(raw.values(), key=_position) if all(isinstance(r, dict) for r in raw.values()) else None
    elif isinstance(raw, list):
        rows = raw
    else:
        rows = None
    if rows is None:
        raise BundleRefused("This is not SillyTavern World Info: it has no `entries`. Nothing was imported.")
    macros = macros or Macros()
    out, odd_logic = [], 0
    for row in rows:
        if not isinstance(row, dict):
            notes.drop("a World Info entry that was not an object was dropped")
            continue
        entry, understood = _entry(row, macros)
        out.append(entry)
        odd_logic += not understood
    if odd_logic:
        notes.warnings.append(f"{odd_logic} World Info entr{'y has' if odd_logic == 1 else 'ies have'} a "
                              "`selectiveLogic` that is not one of 0..3 (AND ANY, NOT ALL, NOT ANY, AND ALL); "
                              "AND ANY, SillyTavern's own default, was used.")
    account(notes, rows, _CARRIED, _MEANINGS, "World Info entries")
    account(notes, [{k: v for k, v in data.items()}], _BOOK_CARRIED, _BOOK_MEANINGS, "book")
    return _text(data.get("name")).strip(), out


def _position(row: dict) -> tuple:
    for key in ("displayIndex", "uid", "id"):
        if isinstance(row.get(key), int):
            return (row[key],)
    return (0,)


def _logic(row: dict) -> Any:
    """`selectiveLogic` where each dialect keeps it: on the entry (World Info)
    or in its `extensions` (a character card's book, as SillyTavern writes it)."""
    for key in ("selectiveLogic", "selective_logic"):
        if key in row:
            return row[key]
    extensions = row.get("extensions")
    if isinstance(extensions, dict):
        for key in ("selectiveLogic", "selective_logic"):
            if key in extensions:
                return extensions[key]
    return 0


def _regex_keys(keys: list[str], row: dict) -> list[str]:
    """A book entry with `use_regex` holds bare patterns: written here as
    `/pattern/` keys (with `i` unless the entry is case-sensitive), the form
    SillyTavern and this workbench read as expressions."""
    if row.get("use_regex") is not True:
        return keys
    flags = "" if row.get("case_sensitive") is True else "i"
    return [k if k.startswith("/") else "/" + re.sub(r"(?<!\\)/", r"\/", k) + "/" + flags for k in keys]


def _entry(row: dict, macros: Macros) -> tuple[Entry, bool]:
    """(the entry, whether its selectiveLogic was understood)."""
    keys = _regex_keys([macros(k) for k in card_keys(row.get("key", row.get("keys")))], row)
    secondary = _regex_keys([macros(k) for k in card_keys(row.get("keysecondary", row.get("secondary_keys")))], row)
    enabled = not row.get("disable", False) and row.get("enabled", True) is not False
    title = _text(row.get("comment")).strip() or _text(row.get("name")).strip() or (keys[0] if keys else "")
    raw_logic = _logic(row)
    logic = logic_name(raw_logic)
    entry = Entry(title=title, keys=keys, secondary=secondary, content=macros(_text(row.get("content"))),
                  enabled=enabled, constant=row.get("constant") is True, selective=row.get("selective") is not False,
                  logic=logic or "and_any")
    return entry, bool(logic) or not secondary


def markdown(name: str, entries: list[Entry]) -> str:
    """The entries as one Markdown document: a section per entry, keys first.
    Each entry opens with the chunker's ENTRY_BREAK, so a heading inside one
    entry never becomes the parent of the entries after it."""
    parts = [f"# {name}"]
    for e in entries:
        parts.append(ENTRY_BREAK)
        parts.append(f"## {e.title or 'Untitled entry'}")
        if e.keys or e.secondary:
            parts.append("Keys: " + ", ".join(e.keys + e.secondary))
        parts.append(e.content.strip())
    return "\n\n".join(parts) + "\n"


def book_plan(format_name: str, name: str, knowledge, cards, notes, attach: bool) -> Plan:
    """A lorebook's cards or knowledge, to add to a campaign (`attach`) or as
    a new campaign with no story of its own, titled after the book."""
    if attach:
        return Plan(format=format_name, campaign=None, knowledge=knowledge, cards=cards, notes=notes)
    plan = read_v1({"campaign": {"title": name}, "branches": [{"id": 1, "parent": None}], "nodes": []},
                   format_name=format_name)
    plan.knowledge, plan.cards = knowledge, cards
    plan.notes.merge(notes)
    return plan


def book_parts(name: str, entries: list[Entry], as_knowledge: bool, classification: str, notes: Notes,
               origin: str) -> tuple[list, list]:
    """(knowledge, cards) for a book's entries: one Markdown source, or a card each."""
    if as_knowledge:
        return _as_source(name, entries, classification, notes), []
    cards = read_cards([_as_card(e) for e in entries], notes)
    for card in cards:
        card.origin = origin[:200]
    return [], cards


def _as_card(e: Entry) -> dict:
    notes = [e.note] if e.note else []
    narrowing = e.secondary if e.selective else []
    if e.secondary and not e.selective:
        notes.append("Secondary keys (not used in the tool it came from, where the entry was not selective): "
                     + ", ".join(e.secondary))
    if not e.enabled:
        notes.append("Disabled in the tool it came from.")
    return {"title": e.title, "keys": e.keys, "entry": e.content, "card_type": "world info", "notes": "\n".join(notes),
            "constant": e.constant, "enabled": e.enabled, "secondary_keys": narrowing, "logic": e.logic}


def _as_source(name: str, entries: list[Entry], classification: str, notes: Notes) -> list:
    kept = []
    for e in entries:
        if e.enabled and e.content.strip():
            kept.append(e)
        else:
            notes.drop(f"World Info entry “{e.title or '(untitled)'}” was left out of the knowledge source "
                       + ("(disabled in its tool)" if not e.enabled else "(it has no text)"))
    if not kept:
        raise BundleRefused("The book has no enabled entries with text to make a knowledge source from. "
                            "Nothing was imported.")
    if any(e.constant for e in kept):
        notes.warnings.append("Entries marked constant are sections of the knowledge source like the others; "
                              "import as cards to keep them always in the prompt.")
    filename = safe_filename(f"{name}.md")
    if not filename.lower().endswith(".md"):
        filename += ".md"
    return read_knowledge([{"title": name, "original_filename": filename, "classification": classification,
                            "content": markdown(name, kept), "media_type": "text/markdown",
                            "notes": f"From {len(kept)} lorebook entries."}], notes)
