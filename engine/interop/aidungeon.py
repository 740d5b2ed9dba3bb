"""AI Dungeon scenarios, adventures and story-card exports, as campaigns.

A scenario's prompt becomes the opening (its `${placeholders}` filled from
`answers`, or left in place and reported), its memory (plot essentials) the
premise, its author's note and AI instructions their fields here, and its
story cards (or the older `worldInfo`) story cards that fire by their keys
as they did in AI Dungeon. An adventure's actions become the story after the
opening, in order. A bare list of cards (AI Dungeon's own card export, or an
old World Info export) becomes cards, in a new campaign or an existing one.
With `as_knowledge=True` the cards become one Markdown knowledge source.

Every other field (sub-scenario options, scripts, tags, images...) is listed
in the report with a count; scripts are never run.
"""
from __future__ import annotations

import re
from typing import Any

from ..bundle.errors import BundleRefused
from ..bundle.fields import MISSING
from ..bundle.library import card_keys, read_cards
from ..bundle.native import read_v1
from ..bundle.plan import Notes, Plan
from .detect import AID_CARDS, AID_SCENARIO
from .ledger import account
from .transcript import PLACEHOLDER, story_nodes

__all__ = ["FORMAT_NAME", "PLACEHOLDER", "fill", "read_ai_dungeon", "read_ai_dungeon_cards"]

FORMAT_NAME = "AI Dungeon scenario"
_CARRIED = {"title", "prompt", "memory", "plotEssentials", "authorsNote", "aiInstructions", "instructions",
            "storyCards", "worldInfo", "actions"}
_MEANINGS = {
    "options": "sub-scenario options (each is its own scenario: import them one by one)",
    "gameCodeOnInput": "scripts (never run here)", "gameCodeOnOutput": "scripts (never run here)",
    "gameCodeOnModelContext": "scripts (never run here)", "gameCodeSharedLibrary": "scripts (never run here)",
    "scripts": "scripts (never run here)", "tags": "tags", "image": "the cover image",
    "contentRating": "the content rating", "nsfw": "the content rating",
    "description": "the scenario description (AI Dungeon shows it on the scenario page)",
    "quests": "quests", "musicTheme": "the music theme", "thirdPerson": "third-person mode",
    "publicId": "its id on AI Dungeon", "id": "its id on AI Dungeon", "shortId": "its id on AI Dungeon",
    "createdAt": "when it was made", "updatedAt": "when it was changed",
}
_CARD_CARRIED = {"keys", "value", "entry", "type", "title", "name", "description"}
_CARD_MEANINGS = {"hidden": "hidden from other players on AI Dungeon", "id": "its id on AI Dungeon",
                  "useForCharacterCreation": "offered in AI Dungeon's character creator",
                  "isNotHidden": "shown to other players on AI Dungeon"}
_PLAYER_ACTIONS = ("do", "say", "story")


def fill(text: str, answers: dict[str, str], unfilled: set[str]) -> str:
    """`${Name}` replaced by answers["Name"]; the rest left as written and collected."""
    def one(match: re.Match) -> str:
        name = match.group(1).strip()
        if name in answers:
            return str(answers[name])
        unfilled.add(name)
        return match.group(0)
    return PLACEHOLDER.sub(one, text)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cards(raw: Any, answers: dict[str, str], unfilled: set[str], notes: Notes) -> Any:
    """AI Dungeon's card fields (value, type, description; `name`/`entry` in
    the older World Info) as this workbench's."""
    if not isinstance(raw, list):
        return raw
    account(notes, raw, _CARD_CARRIED, _CARD_MEANINGS, "story cards")
    return [{"title": fill(_text(c.get("title")) or _text(c.get("name")), answers, unfilled) or _first_key(c),
             "keys": card_keys(c.get("keys")),
             "entry": fill(_text(c.get("value", c.get("entry"))), answers, unfilled),
             "card_type": _text(c.get("type")), "notes": _text(c.get("description")), "origin": "AI Dungeon"}
            if isinstance(c, dict) else c for c in raw]


def _first_key(card: dict) -> str:
    """A title for a card that has none (old World Info exports): its first
    key, without a script's `#[...]` attributes."""
    keys = card_keys(card.get("keys"))
    return re.sub(r"#\[[^\]]*\]\s*$", "", keys[0]).strip()[:200] if keys else ""


def _nodes(opening: str, actions: Any, answers: dict[str, str], unfilled: set[str]) -> list[dict]:
    rows = [a for a in actions if isinstance(a, dict)] if isinstance(actions, list) else []
    if rows and rows[0].get("type") == "start" and not opening.strip():
        opening, rows = _text(rows[0].get("text")), rows[1:]
    return story_nodes(opening, [(fill(_text(r.get("text")), answers, unfilled), r.get("type") in _PLAYER_ACTIONS)
                                 for r in rows])


def read_ai_dungeon(data: Any, answers: dict[str, str] | None = None, fallback_title: str = "", *,
                    as_knowledge: bool = False, classification: str = "reference") -> Plan:
    """A scenario or adventure (object) as a new campaign; pure."""
    from .detect import detect

    if isinstance(data, dict) and isinstance(data.get("scenario"), dict):
        data = data["scenario"]
    found = detect(data)
    if found.format != AID_SCENARIO:
        raise BundleRefused(f"This is not an AI Dungeon scenario or adventure: it looks like {found.label}. "
                            "Nothing was imported.")
    answers, unfilled, notes = dict(answers or {}), set(), Notes()
    opening = fill(_text(data.get("prompt")), answers, unfilled)
    nodes = _nodes(opening, data.get("actions"), answers, unfilled)
    cards = _cards(data.get("storyCards", data.get("worldInfo", MISSING)), answers, unfilled, notes)
    native = {
        "campaign": {
            "title": _text(data.get("title")).strip() or fallback_title or "AI Dungeon scenario",
            "premise": fill(_text(data.get("memory", data.get("plotEssentials"))), answers, unfilled),
            "authors_note": fill(_text(data.get("authorsNote")), answers, unfilled),
            "ai_instructions": fill(_text(data.get("aiInstructions", data.get("instructions"))), answers, unfilled),
        },
        "branches": [{"id": 1, "parent": None}], "nodes": nodes,
        "story_cards": [] if as_knowledge else cards,
    }
    plan = read_v1(native, format_name=FORMAT_NAME if not data.get("actions") else "AI Dungeon adventure")
    if as_knowledge and isinstance(cards, list):
        plan.knowledge = _as_knowledge(plan.campaign["title"], cards, classification, notes)
    account(notes, [data], _CARRIED, _MEANINGS, "scenario")
    if unfilled:
        notes.warnings.append("Placeholders left as written (pass answers={...} to fill them): "
                              + ", ".join(f"${{{n}}}" for n in sorted(unfilled)))
    plan.notes.merge(notes)
    return plan


def read_ai_dungeon_cards(data: Any, *, as_knowledge: bool = False, classification: str = "reference",
                          title: str = "AI Dungeon story cards") -> Plan:
    """A bare card export (a list) as cards (or one knowledge source) to add; pure."""
    from .detect import detect

    found = detect(data)
    if found.format != AID_CARDS:
        raise BundleRefused(f"This is not an AI Dungeon story-card export: it looks like {found.label}. "
                            "Nothing was imported.")
    notes = Notes()
    raw = _cards(data, {}, set(), notes)
    if as_knowledge:
        return Plan(format="AI Dungeon story cards", campaign=None,
                    knowledge=_as_knowledge(title, raw, classification, notes), notes=notes)
    cards = read_cards(raw, notes)
    if not cards:
        raise BundleRefused("The file holds no story cards. Nothing was imported.")
    return Plan(format="AI Dungeon story cards", campaign=None, cards=cards, notes=notes)


def _as_knowledge(title: str, cards: list, classification: str, notes: Notes) -> list:
    from .worldinfo import Entry, book_parts

    entries = [Entry(title=c["title"], keys=c["keys"], secondary=[], content=c["entry"], enabled=True)
               for c in cards if isinstance(c, dict)]
    knowledge, _ = book_parts(title, entries, True, classification, notes, origin="AI Dungeon")
    return knowledge
