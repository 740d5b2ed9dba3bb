"""Which cards fire for a turn: keys in the recent story or the pending input.

The rule is the one users bring from their own tools: a key matches
case-insensitively as a whole word or phrase ("Mara" fires on "mara's" but
not on "Amaranth"); a `/pattern/flags` key is a regular expression, read as
SillyTavern reads it (flags g, i, m, s, u, y; an expression with an unescaped
`/` inside, or one that does not compile, is plain text); a constant card
always fires; a disabled card never does. Only the card's text reaches the
narrator, never its keys or notes.

Secondary keys narrow a card as SillyTavern's selective entries do: once a
primary key has matched, `logic` decides over the secondary keys found in
the same scanned texts — "and_any" (at least one), "and_all" (every one),
"not_any" (none), "not_all" (not every one). SillyTavern writes these as
`selectiveLogic` 0..3 in the order of `LOGICS`.

A key written in a script's syntax (AI Dungeon World Info scripts append
attributes such as `Honeywood#[t=5l=5f=2S=2]`), or holding a macro its tool
expands first (`{{getvar::x}}`), cannot be evaluated here: it never fires,
and `unusable_keys` names it so the import report and the lore panel can say
so instead of staying silent.

`fired_cards` is pure (cards and texts in, fired cards out) so it can be
tested and timed without a database; `lore_for` reads the campaign's
enabled cards and calls it.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..budget import tokens
from ..store.cards_tables import StoryCardRow
from .editing import LOGICS, Card

__all__ = ["SCAN_DEPTH", "Fired", "fired_cards", "key_pattern", "logic_name", "lore_for", "unusable",
           "unusable_keys"]

# Story nodes scanned for keys, newest first. SillyTavern scans 2 messages by
# default and AI Dungeon the last 6 actions (peer-systems digest); 4 nodes is
# two exchanges of input and narration here, between the two.
SCAN_DEPTH = 4
# SillyTavern's parseRegexFromString: `/pattern/flags` with JavaScript's flags.
_REGEX_KEY = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
# g changes nothing for a yes/no test; u is Python's default for text; y
# (sticky) anchors the match at the start, where a fresh expression begins.
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": 0, "g": 0, "y": 0}
# JavaScript spellings Python writes differently.
_JS_SYNTAX = ((re.compile(r"\(\?<([A-Za-z_]\w*)>"), r"(?P<\1>"), (re.compile(r"\\k<([A-Za-z_]\w*)>"), r"(?P=\1)"),
              (re.compile(r"\[\^\]"), r"[\\s\\S]"))
# A script's attributes after the key (AI Dungeon World Info scripts): `name#[t=5l=5]`.
_SCRIPT_ATTRIBUTES = re.compile(r"#\[[^\]]*\]\s*$")
# A chat tool's macro left in a key ({{user}} with no name given, RisuAI's {{getvar::x}}):
# the tool expands it before matching; no story text holds it as written.
_MACRO = re.compile(r"\{\{[^{}]*\}\}")


@dataclass(frozen=True)
class Fired:
    """A card chosen for this turn, and why: `found_in` is "always" (a
    constant card), "input" (the pending input names it) or "story" (one of
    the last SCAN_DEPTH story texts does); `key` is the key that matched and
    `distance` how many texts back it was found (0 = the newest)."""

    card_id: int
    title: str
    text: str
    card_type: str
    origin: str
    found_in: str
    key: str = ""
    distance: int = 0

    @property
    def constant(self) -> bool:
        return self.found_in == "always"

    @property
    def own(self) -> bool:
        """Written by the reader for this campaign, not brought in from a file."""
        return (self.origin or "").strip().lower() in OWN_ORIGINS

    def record(self) -> dict:
        """JSON-ready provenance for a turn report (no text)."""
        return {"card_id": self.card_id, "title": self.title, "card_type": self.card_type, "origin": self.origin,
                "found_in": self.found_in, "key": self.key, "distance": self.distance,
                "tokens": tokens.count(self.text)}

    def to_retrieved(self, classification: str = "canon"):
        """The card as a knowledge-retrieval candidate (`engine.knowledge.
        records.Retrieved`), so it is ranked and priced with the library's
        passages under one budget. Ids are negative: a card is not a passage
        and must never be mistaken for one."""
        from ..search.results import Retrieved

        n = tokens.count(self.text)
        return Retrieved(passage_id=-self.card_id, source_id=-self.card_id, title=self.title,
                         filename=f"{OWN_LORE_FILE if self.own else 'story card'} {self.card_id}",
                         classification=classification, hidden=False,
                         heading=self.title, number=1, text=self.text, tokens=n, always=self.constant,
                         admitted_by="" if self.constant else "lexical", lexical=0.0 if self.constant else 1.0,
                         matched_terms=(self.key,) if self.key else ())


# Cards whose origin says the reader wrote them here (the Lore panel and
# add_story_card say "added by hand"; files from before origins were kept say
# nothing); every import names its tool. Named as engine.knowledge.framing.
# OWN_LORE_FILE says, they are framed as the story's own lore.
OWN_ORIGINS = ("", "added by hand")
OWN_LORE_FILE = "story lore"


def logic_name(value) -> str:
    """One of LOGICS from SillyTavern's number (0..3) or a name ("AND ALL",
    "not_any"); "" for anything else, so a reader can say it was not understood."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return LOGICS[value] if 0 <= value < len(LOGICS) else ""
    if isinstance(value, str):
        name = re.sub(r"[\s-]+", "_", value.strip().lower())
        return name if name in LOGICS else ""
    return ""


def unusable(key: str) -> str:
    """Why `key` can never fire here ("" when it can): words for the report."""
    if _SCRIPT_ATTRIBUTES.search(key):
        return "a script's attributes (#[...]) this workbench does not run"
    if _MACRO.search(key):
        return "a macro ({{...}}) this workbench does not expand"
    return ""


def unusable_keys(keys) -> list[str]:
    """The keys of `keys` that can never fire, as written."""
    return [k for k in keys if isinstance(k, str) and unusable(k)]


@lru_cache(maxsize=16384)
def _expression(key: str) -> re.Pattern | None:
    """The compiled `/pattern/flags` key, or None when SillyTavern would read it as plain text."""
    found = _REGEX_KEY.match(key)
    if not found or _UNESCAPED_SLASH.search(found.group(1)):
        return None
    pattern = found.group(1).replace("\\/", "/")
    for js, python in _JS_SYNTAX:
        pattern = js.sub(python, pattern)
    flags = 0
    for letter in found.group(2):
        flags |= _FLAGS[letter]
    if "y" in found.group(2):
        pattern = r"\A(?:" + pattern + ")"
    try:
        return re.compile(pattern, flags)
    except (re.error, OverflowError, RecursionError):
        return None  # not a valid expression: the key is taken literally, as written


@lru_cache(maxsize=16384)
def key_pattern(key: str) -> re.Pattern | None:
    """The compiled matcher for one key; None for a key that cannot match
    (empty, or in a syntax this workbench cannot evaluate)."""
    key = key.strip()
    if not key or unusable(key):
        return None
    expression = _expression(key)
    if expression is not None:
        return expression
    return re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)", re.IGNORECASE)


_WORD = re.compile(r"\w+")
# Longest key, in words, that the word-sequence index covers; a longer key is
# searched directly (no real lorebook key seen was longer than 6 words).
_MAX_WORDS = 8


@lru_cache(maxsize=16384)
def _words(key: str) -> str | None:
    """A literal key as lowercased words joined by one space: the index entry
    that must be present in a text for the key to match it. None for a key
    that must always be searched (an expression, or no word characters)."""
    key = key.strip()
    if _expression(key) is not None or unusable(key):
        return None
    words = _WORD.findall(key.lower())
    return " ".join(words) if 0 < len(words) <= _MAX_WORDS else None


def _grams(lowered: str, longest: int) -> set[str]:
    words = _WORD.findall(lowered)
    return {" ".join(words[i:i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)}


class _Index:
    """The cards' keys by their word sequence, built once per call, so a text
    is matched by one set intersection instead of a search per key: 1,000
    cards of 3 keys over four story texts and an input went from 357 ms (a
    regex search per key and text) to about 10 ms on the 2-core development
    machine (`python tests/cards/bench_triggering.py`)."""

    def __init__(self, cards: list[Card]) -> None:
        self.by_words: dict[str, list[tuple[Card, str]]] = {}
        self.searched: list[tuple[Card, str]] = []  # keys with no word index: searched in every text
        self.longest = 0
        for card in cards:
            for key in card.keys:
                words = _words(key)
                if words is None:
                    if key_pattern(key) is not None:
                        self.searched.append((card, key))
                else:
                    if words not in self.by_words:
                        self.by_words[words] = []
                        self.longest = max(self.longest, words.count(" ") + 1)
                    self.by_words[words].append((card, key))

    def matches(self, text: str) -> dict[int, set[str]]:
        """Card id -> the keys (as written on the card) that match `text`."""
        found: dict[int, set[str]] = {}
        candidates = [pair for words in self.by_words.keys() & _grams(text.lower(), self.longest)
                      for pair in self.by_words[words]] + self.searched
        for card, key in candidates:
            if card.id not in found or key not in found[card.id]:
                if key_pattern(key).search(text):  # the exact rule: case-insensitive, whole words
                    found.setdefault(card.id, set()).add(key)
        return found


def fired_cards(cards: Iterable[Card], recent_texts: Sequence[str], pending: str = "") -> list[Fired]:
    """Constant cards first (in card order), then cards the input names, then
    cards the story names, nearest first. `recent_texts` is oldest first, as
    the story reads; only its last SCAN_DEPTH texts are scanned. The key
    reported is the card's first key that matched. A card with secondary
    keys fires only when its logic holds over all the scanned texts."""
    live = [c for c in cards if c.enabled and c.entry.strip()]
    index = _Index([c for c in live if not c.constant])
    texts = ([("input", 0, pending)] if pending else []) + [
        ("story", d, t) for d, t in enumerate(t for t in list(recent_texts)[-SCAN_DEPTH:][::-1] if t)]
    out = [_fired(c, "always") for c in live if c.constant]
    done = {f.card_id for f in out}
    by_id = {c.id: c for c in live}
    # SillyTavern joins the scanned messages with a separator no key matches across.
    scanned = "\x01".join(t for _, _, t in texts)
    for found_in, distance, text in texts:
        for card_id, keys in index.matches(text).items():
            if card_id not in done:
                card = by_id[card_id]
                done.add(card_id)
                if _secondary_holds(card, scanned):
                    out.append(_fired(card, found_in, next(k for k in card.keys if k in keys), distance))
    order = {"always": 0, "input": 1, "story": 2}
    return sorted(out, key=lambda f: (order[f.found_in], f.distance, f.card_id))


def _secondary_holds(card: Card, scanned: str) -> bool:
    """SillyTavern's selective logic over the card's secondary keys. A key
    that can never fire counts as not found, as an empty key does there."""
    secondary = [k for k in card.secondary_keys if k.strip()]
    if not secondary:
        return True
    found = [bool(p and p.search(scanned)) for p in map(key_pattern, secondary)]
    logic = card.logic or "and_any"
    if logic == "and_all":
        return all(found)
    if logic == "not_any":
        return not any(found)
    if logic == "not_all":
        return not all(found)
    return any(found)


def _fired(card: Card, found_in: str, key: str = "", distance: int = 0) -> Fired:
    return Fired(card_id=card.id, title=card.title, text=card.entry, card_type=card.card_type, origin=card.origin,
                 found_in=found_in, key=key, distance=distance)


def lore_for(session: Session, campaign_id: int, recent_texts: Sequence[str], pending: str = "") -> list[Fired]:
    """The campaign's cards that fire for a turn whose story ends with
    `recent_texts` (oldest first) and whose input is `pending`."""
    rows = session.scalars(select(StoryCardRow).where(StoryCardRow.campaign_id == campaign_id,
                                                      StoryCardRow.enabled.is_(True))
                           .order_by(StoryCardRow.id)).all()
    return fired_cards([Card.of(r) for r in rows], recent_texts, pending)
