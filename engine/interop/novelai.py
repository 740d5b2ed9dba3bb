"""NovelAI lorebooks (`.lorebook`) as story cards or one knowledge source.

An entry's `text` is the card's text (byte-exact), `displayName` its title,
`keys` its keys (a `/regex/flags` key stays a regular expression, as in
NovelAI), `enabled` its switch and `forceActivation` its always-on flag; the
entry's category becomes its type. Everything about placement and budget
(`contextConfig`, `searchRange`, key-relative insertion, bias groups...) is
listed in the report with a count.
"""
from __future__ import annotations

from typing import Any

from ..bundle.errors import BundleRefused
from ..bundle.plan import Notes, Plan
from .detect import NOVELAI
from .ledger import account
from .worldinfo import Entry, book_parts, book_plan, refuse_unless

__all__ = ["FORMAT_NAME", "read_novelai"]

FORMAT_NAME = "NovelAI lorebook"
_CARRIED = {"text", "displayName", "keys", "enabled", "forceActivation", "category", "id"}
_MEANINGS = {
    "contextConfig": "where and how the entry was inserted (prefix, suffix, token budget, trim, position)",
    "searchRange": "how many characters of the story were searched for keys",
    "keyRelative": "insertion relative to the last key found",
    "nonStoryActivatable": "whether other entries could activate it",
    "loreBiasGroups": "phrase bias applied while it was active", "advancedConditions": "advanced conditions",
    "lastUpdatedAt": "the time it was last edited",
}
_BOOK_CARRIED = {"lorebookVersion", "entries", "categories"}
_BOOK_MEANINGS = {"settings": "the lorebook's settings (orderByKeyLocations)", "order": "a custom entry order"}
_CATEGORY_MEANINGS = {"subcontextSettings": "the category's sub-context settings",
                      "categoryDefaults": "defaults for new entries", "categoryBiasGroups": "phrase bias",
                      "createSubcontext": "whether it made a sub-context", "useCategoryDefaults": "",
                      "settings": "the category's settings"}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def read_novelai(data: Any, *, as_knowledge: bool = False, attach: bool = False, fallback_title: str = "",
                 classification: str = "reference") -> Plan:
    """A new campaign holding the lorebook (or, with `attach`, only what to add); pure."""
    refuse_unless(data, NOVELAI, "a NovelAI lorebook")
    rows = data.get("entries")
    if not isinstance(rows, list):
        raise BundleRefused("This NovelAI lorebook has no list of `entries`. Nothing was imported.")
    notes = Notes()
    categories = {c.get("id"): c for c in data.get("categories") or [] if isinstance(c, dict)}
    entries, types = [], []
    for row in rows:
        if not isinstance(row, dict):
            notes.drop("a lorebook entry that was not an object was dropped")
            continue
        entry, category = _entry(row, categories)
        entries.append(entry)
        types.append(category)
    regex = sum(1 for e in entries for k in e.keys if k.startswith("/") and k.rstrip("imsu").endswith("/"))
    if regex:
        notes.warnings.append(f"{regex} regular-expression keys (/.../) are kept and matched as expressions.")
    account(notes, rows, _CARRIED, _MEANINGS, "lorebook entries")
    account(notes, [data], _BOOK_CARRIED, _BOOK_MEANINGS, "lorebook")
    account(notes, list(categories.values()), {"id", "name", "enabled"}, _CATEGORY_MEANINGS, "categories")
    disabled = [c.get("name") for c in categories.values() if c.get("enabled") is False]
    if disabled:
        notes.warnings.append("Entries of disabled categories were switched off: " + ", ".join(map(str, disabled)))
    name = fallback_title or "NovelAI lorebook"
    knowledge, cards = book_parts(name, entries, as_knowledge, classification, notes,
                                  origin=f"{FORMAT_NAME}: {name}")
    if cards:  # read_cards keeps exactly the entries with a title, a text or keys, in order
        kept = [t for e, t in zip(entries, types, strict=True) if e.title.strip() or e.content.strip() or e.keys]
        for card, category in zip(cards, kept, strict=True):
            card.card_type = category
    return book_plan(FORMAT_NAME, name, knowledge, cards, notes, attach)


def _entry(row: dict, categories: dict) -> tuple[Entry, str]:
    """The entry, and its category's name (its type here)."""
    keys = [k for k in row.get("keys") or [] if isinstance(k, str) and k.strip()]
    category = categories.get(row.get("category"))
    enabled = row.get("enabled", True) is not False and not (category and category.get("enabled") is False)
    entry = Entry(title=_text(row.get("displayName")).strip() or (keys[0] if keys else ""), keys=keys, secondary=[],
                  content=_text(row.get("text")), enabled=enabled, constant=row.get("forceActivation") is True)
    return entry, (_text(category.get("name")) if category else "")[:40] or "lore"
