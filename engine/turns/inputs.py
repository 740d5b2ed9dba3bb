"""Turning what the reader typed into the line the story records.

The reference's early "> You " prefix turned "I enter" into "You I enter",
and the model copied it into its prose; so first-person input is kept as
written, "You" is added otherwise, and the marker is never doubled.
"""
from __future__ import annotations

import re

from ..errors import NotAllowed

__all__ = ["direction_line", "player_line", "speaker_of", "story_line"]

FIRST_PERSON = ("i ", "i'm ", "i've ", "i'll ", "i'd ", "my ", "we ", "we're ", "we've ", "we'll ")
QUOTES = "\"'“”‘’«»"
FINAL = ".!?…"
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _whole_characters(text: str) -> str:
    """A lone surrogate (half of an emoji, left by a paste or a widget cut in
    the middle) cannot be stored or sent as UTF-8; say so before the turn
    starts, rather than fail inside it."""
    found = _SURROGATE_RE.search(text)
    if found:
        raise NotAllowed(f"The text has a broken character at position {found.start() + 1} (a lone surrogate, "
                         f"U+{ord(found.group()):04X}: half of an emoji or symbol). Delete it and type the "
                         "character again.")
    return text


def _finish(text: str) -> str:
    bare = text.rstrip(QUOTES)
    return text if bare.endswith(tuple(FINAL)) else text + "."


# `Name: "…"` (or `Name: …`) is a line of dialogue by Name: up to three
# capitalised words before the colon. Read as an action it became
# `> You caroline: "…"` (the long conversation, every line of it).
_SPEAKER = re.compile(r"^((?:[A-Z][\w'’.-]*)(?:\s+[A-Z][\w'’.-]*){0,2})\s*:\s*(\S.*)$", re.S)
NOT_SPEAKERS = {"you", "i", "we", "note", "ooc", "story", "chapter", "day", "session", "part", "warning", "p.s"}


def speaker_of(text: str) -> str | None:
    """The speaker of a `Name: "…"` line (a stored one may keep its '> '), or None."""
    text = (text or "").strip().lstrip(">").strip()
    found = _SPEAKER.match(text)
    if found is None or found.group(1).lower() in NOT_SPEAKERS or not found.group(2).strip():
        return None
    return found.group(1)


def player_line(text: str) -> str:
    """`> You open the door.`, `> I enter the tavern.`, `> You say "Hello."`,
    and `> Caroline: "I went to the group."` kept as written: a line of
    dialogue by a named speaker is neither the protagonist's nor lower-cased."""
    text = " ".join(_whole_characters(text or "").split())
    while text.startswith(">"):
        text = text[1:].lstrip()
    if not text:
        raise NotAllowed("Write what you do or say, e.g. 'open the door' or '\"Who goes there?\"'.")
    if speaker_of(text) is not None:
        return f"> {text}"
    if text[0] in QUOTES:
        spoken = text.strip(QUOTES + " ")
        if not spoken:
            raise NotAllowed("The quotes are empty: write what you say between them.")
        return f'> You say "{_finish(spoken)}"'
    if text[:4].lower() == "you ":
        text = text[4:].lstrip()
    text = _finish(text)
    lowered = text.lower().replace("’", "'")
    if lowered.startswith(FIRST_PERSON):
        return f"> {text[0].upper()}{text[1:]}"
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]  # "Open the door" -> "You open the door"
    return f"> You {text}"


def story_line(text: str) -> str:
    """Story mode (AI Dungeon's Story, the reference's "story" input): prose
    that goes into the story exactly as typed, line breaks included; only
    the ends are trimmed."""
    text = _whole_characters(text or "").strip()
    if not text:
        raise NotAllowed("Story mode adds your text to the story as written: write some, e.g. "
                         "'The storm broke over the harbour that night.'")
    return text


def direction_line(text: str) -> str:
    """Story direction is out of character and kept exactly as written."""
    text = _whole_characters(text or "").strip()
    if not text:
        raise NotAllowed("A story direction needs some words, e.g. 'Make the storm break.'")
    return text
