"""Shared pieces for the security tests: real exports to mutate, and a census.

The bundles are the same ones the bundle tests build (a rich played campaign
and a reference-format v3 file), so a fuzzer mutates what real users carry.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "bundle"))

from campaigns import build_rich, census, configure  # noqa: E402
from reference_files import v3  # noqa: E402

__all__ = ["CHARACTER_CARD", "KOBOLD_SAVE", "NOVELAI_LOREBOOK", "PAYLOADS", "SCENARIO", "WORLD_INFO", "build_rich",
           "census", "configure", "v3"]

# What an attacker types into a title, a card, a server's model list or a
# stored report; each must come out of every view as text.
PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned=1\">",
    "<svg onload=window.__pwned=1>",
    "<a href=\"javascript:window.__pwned=1\">click</a>",
    "' onmouseover='window.__pwned=1' x='",
    "\" autofocus onfocus=\"window.__pwned=1",
    "</td></tr></table><script>window.__pwned=1</script>",
    "\u202eexe.txt\u202c and \u2066isolate\u2069",
    "nul\x00byte",
]


# Small files in other tools' formats, for the fuzzer to mutate.
SCENARIO = {
    "title": "Salt and Iron", "prompt": "You are ${Name?}, a smith in a harbour town.",
    "memory": "The harbour froze last winter.", "authorsNote": "Tone: cold.",
    "storyCards": [{"keys": "forge, anvil", "value": "The forge never goes out.", "type": "location",
                    "title": "Forge", "description": "where it starts"}],
    "tags": ["winter"],
}
WORLD_INFO = {
    "name": "Harbour lore",
    "entries": {"0": {"uid": 0, "key": ["harbour"], "keysecondary": [], "comment": "Harbour",
                      "content": "Ice closes the harbour every winter.", "constant": False, "order": 10,
                      "position": 0, "disable": False}},
}

CHARACTER_CARD = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {"name": "Mara", "description": "An innkeeper.", "personality": "wary", "scenario": "A frozen port.",
             "first_mes": "Mara looks up from the bar.", "mes_example": "", "creator_notes": "", "tags": [],
             "character_book": {"entries": [{"keys": ["bar"], "content": "The bar is oak.", "enabled": True}]}},
}
KOBOLD_SAVE = {
    "gamestarted": True, "prompt": "The harbour is frozen.", "memory": "You are a smith.",
    "authorsnote": "Cold.", "actions": ["> You light the forge.", "The forge roars."],
    "worldinfo": [{"key": "forge", "content": "The forge never goes out.", "constant": False}],
}
NOVELAI_LOREBOOK = {
    "lorebookVersion": 5,
    "entries": [{"text": "Ice closes the harbour.", "displayName": "Harbour", "keys": ["harbour"], "enabled": True}],
    "categories": [],
}

