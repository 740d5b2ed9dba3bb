"""AI Dungeon scenarios and story-card exports, as campaigns.

A scenario's prompt becomes the opening (its `${placeholders}` filled from
`answers`, or left in place and reported), its memory (plot essentials) the
premise, its author's note and AI instructions their fields here, and its
story cards story cards. A bare list of cards (AI Dungeon's own card export)
becomes cards, in a new campaign or an existing one.

What a scenario has that a campaign here does not (sub-scenario options,
scripts, tags, images) is listed in the report; scripts are never run.
"""
from __future__ import annotations

import re
from typing import Any

from .errors import BundleRefused
from .fields import MISSING
from .library import card_keys, read_cards
from .native import read_v1
from .plan import Notes, Plan

__all__ = ["FORMAT_NAME", "PLACEHOLDER", "fill", "read_ai_dungeon", "read_ai_dungeon_cards"]

FORMAT_NAME = "AI Dungeon scenario"
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_NOT_CARRIED = {
    "options": "sub-scenario options (each is its own scenario: import them one by one)",
    "gameCodeOnInput": "scripts (never run here)", "gameCodeOnOutput": "scripts (never run here)",
    "gameCodeOnModelContext": "scripts (never run here)", "gameCodeSharedLibrary": "scripts (never run here)",
    "scripts": "scripts (never run here)", "tags": "tags", "image": "the cover image",
    "contentRating": "the content rating", "nsfw": "the content rating",
    "description": "the scenario description (AI Dungeon shows it on the scenario page)",
    "quests": "quests", "musicTheme": "the music theme",
}


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


def _cards(raw: Any, answers: dict[str, str], unfilled: set[str]) -> Any:
    """AI Dungeon's card keys (value, type, description) as this workbench's."""
    if not isinstance(raw, list):
        return raw
    return [{"title": fill(_text(c.get("title")), answers, unfilled), "keys": card_keys(c.get("keys")),
             "entry": fill(_text(c.get("value", c.get("entry"))), answers, unfilled),
             "card_type": _text(c.get("type")), "notes": _text(c.get("description"))}
            if isinstance(c, dict) else c for c in raw]


def read_ai_dungeon(data: Any, answers: dict[str, str] | None = None, fallback_title: str = "") -> Plan:
    """A scenario (object) as a new campaign; pure."""
    if isinstance(data, dict) and isinstance(data.get("scenario"), dict):
        data = data["scenario"]
    if not isinstance(data, dict) or not any(k in data for k in ("prompt", "storyCards", "memory", "title")):
        raise BundleRefused("This is not an AI Dungeon scenario: it has no prompt, memory or story cards. "
                            "Nothing was imported.")
    answers, unfilled, notes = dict(answers or {}), set(), Notes()
    opening = fill(_text(data.get("prompt")), answers, unfilled).strip()
    native = {
        "campaign": {
            "title": _text(data.get("title")).strip() or fallback_title or "AI Dungeon scenario",
            "premise": fill(_text(data.get("memory", data.get("plotEssentials"))), answers, unfilled).strip(),
            "authors_note": fill(_text(data.get("authorsNote")), answers, unfilled).strip(),
            "ai_instructions": fill(_text(data.get("aiInstructions", data.get("instructions"))), answers,
                                    unfilled).strip(),
        },
        "branches": [{"id": 1, "parent": None}],
        "nodes": [{"id": 1, "branch": 1, "depth": 0, "kind": "start", "text": opening, "live": True}]
        if opening else [],
        "story_cards": _cards(data.get("storyCards", data.get("worldInfo", MISSING)), answers, unfilled),
    }
    plan = read_v1(native, format_name=FORMAT_NAME)
    for key, words in _NOT_CARRIED.items():
        if data.get(key) not in (None, "", [], {}, False):
            notes.lose(words)
    if unfilled:
        notes.warnings.append("Placeholders left as written (pass answers={...} to fill them): "
                              + ", ".join(f"${{{n}}}" for n in sorted(unfilled)))
    if plan.cards:
        notes.warnings.append("Story cards are kept with the campaign for reference; the narrator does not read "
                              "them. Import the cards as knowledge to have them retrieved.")
    plan.notes.merge(notes)
    return plan


def read_ai_dungeon_cards(data: Any) -> Plan:
    """A bare card export (a list) as cards to add; pure."""
    if not isinstance(data, list):
        raise BundleRefused("This is not an AI Dungeon story-card export (a list of cards). Nothing was imported.")
    notes = Notes()
    cards = read_cards(_cards(data, {}, set()), notes)
    if not cards:
        raise BundleRefused("The file holds no story cards. Nothing was imported.")
    plan = Plan(format="AI Dungeon story cards", campaign=None, cards=cards, notes=notes)
    notes.warnings.append("Story cards are kept with the campaign for reference; the narrator does not read them.")
    return plan
