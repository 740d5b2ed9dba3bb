"""KoboldAI saves as campaigns: the story, memory, author's note and world info.

The prompt is the opening; each action is a story node after it, in order
(an action KoboldAI's adventure mode wrote as `> ...` is the player's, the
rest narration), every text byte-exact. Memory becomes the premise, the
author's note the author's note, and world info story cards that fire by
their keys (`constant` ones always). Both the classic save (`actions` a list)
and KoboldAI United's (`actions` keyed by number) are read; what has no place
here is listed with a count.
"""
from __future__ import annotations

from typing import Any

from ..bundle.errors import BundleRefused
from ..bundle.library import card_keys, read_cards
from ..bundle.native import read_v1
from ..bundle.plan import Notes, Plan
from .detect import KOBOLDAI
from .ledger import account
from .transcript import PLACEHOLDER, story_nodes
from .worldinfo import refuse_unless

__all__ = ["FORMAT_NAME", "read_koboldai", "story_nodes"]

FORMAT_NAME = "KoboldAI save"
_CARRIED = {"prompt", "memory", "authorsnote", "actions", "worldinfo", "gamestarted", "file_version"}
_MEANINGS = {
    "anotetemplate": "the author's note template (the note itself is carried)",
    "actions_metadata": "alternative generations kept for each action",
    "wifolders_d": "world info folders", "wifolders_l": "world info folder order", "wifolders_u": "world info folders",
    "savedsettings": "generation settings", "lua_koboldbridge": "Lua scripts (never run here)",
    "userscripts": "user scripts (never run here)", "story_name": "the story name",
}
_WI_CARRIED = {"key", "keysecondary", "content", "comment", "constant", "uid", "num", "init", "selective"}
_WI_MEANINGS = {"folder": "its world info folder"}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _actions(raw: Any) -> list[Any]:
    if isinstance(raw, dict):  # KoboldAI United: {"0": "...", "1": "..."}
        return [raw[k] for k in sorted(raw, key=lambda k: int(k) if str(k).isdigit() else 0)]
    return raw if isinstance(raw, list) else []


def _is_player(text: str) -> bool:
    return text.lstrip("\n").startswith(">")


def read_koboldai(data: Any, *, fallback_title: str = "") -> Plan:
    """A save as a new campaign; pure."""
    refuse_unless(data, KOBOLDAI, "a KoboldAI save")
    notes = Notes()
    actions = _actions(data.get("actions"))
    if any(not isinstance(a, str) for a in actions):
        raise BundleRefused("This KoboldAI save has an action that is not text, so its story cannot be read "
                            "in order. Nothing was imported.")
    world = data.get("worldinfo") if isinstance(data.get("worldinfo"), list) else []
    cards = read_cards([_card(w) for w in world if isinstance(w, dict)], notes)
    for card in cards:
        card.origin = f"{FORMAT_NAME}: {fallback_title or 'story'}"[:200]
    dropped = sum(1 for w in world if not isinstance(w, dict))
    for _ in range(dropped):
        notes.drop("a world info entry that was not an object was dropped")
    account(notes, [data], _CARRIED, _MEANINGS, "save")
    account(notes, world, _WI_CARRIED, _WI_MEANINGS, "world info entries")
    prompt = _text(data.get("prompt"))
    placeholders = sorted({m.group(0) for t in [prompt, *actions] for m in PLACEHOLDER.finditer(t)})
    if placeholders:
        notes.warnings.append("Placeholders left as written (KoboldAI does not fill them either): "
                              + ", ".join(placeholders))
    native = {"campaign": {"title": fallback_title or "KoboldAI story", "premise": _text(data.get("memory")),
                           "authors_note": _text(data.get("authorsnote"))},
              "branches": [{"id": 1, "parent": None}], "nodes": story_nodes(prompt, [(a, _is_player(a)) for a in actions])}
    plan = read_v1(native, format_name=FORMAT_NAME)
    plan.cards = cards
    plan.notes.merge(notes)
    return plan


def _card(row: dict) -> dict:
    """A selective entry fires in KoboldAI when a primary key and any secondary
    key are both found: here, secondary keys with the "and_any" logic."""
    keys = card_keys(row.get("key"))
    secondary = card_keys(row.get("keysecondary"))
    selective = row.get("selective") is True
    unused = ("Secondary keys (not used in KoboldAI, where the entry was not selective): " + ", ".join(secondary)
              if secondary and not selective else "")
    return {"title": _text(row.get("comment")).strip() or (keys[0] if keys else ""), "keys": keys,
            "entry": _text(row.get("content")), "card_type": "world info", "notes": unused,
            "constant": row.get("constant") is True, "secondary_keys": secondary if selective else [],
            "logic": "and_any"}
