"""Which cards fire for a turn: keys in the recent story or the pending input.

The rule is the one users bring from their own tools: a key matches
case-insensitively as a whole word or phrase ("Mara" fires on "mara's" but
not on "Amaranth"); a NovelAI-style `/pattern/flags` key is a regular
expression; a constant card always fires; a disabled card never does. Only
the card's text reaches the narrator, never its keys or notes.

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

from ..context import tokens
from ..store.cards_tables import StoryCardRow
from .store import Card

__all__ = ["SCAN_DEPTH", "Fired", "fired_cards", "key_pattern", "lore_for"]

# Story nodes scanned for keys, newest first. SillyTavern scans 2 messages by
# default and AI Dungeon the last 6 actions (peer-systems digest); 4 nodes is
# two exchanges of input and narration here, between the two.
SCAN_DEPTH = 4
_REGEX_KEY = re.compile(r"^/(.+)/([imsu]*)$", re.DOTALL)
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": 0}


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
        from ..knowledge.records import Retrieved

        n = tokens.count(self.text)
        return Retrieved(passage_id=-self.card_id, source_id=-self.card_id, title=self.title,
                         filename=f"story card {self.card_id}", classification=classification, hidden=False,
                         heading=self.title, number=1, text=self.text, tokens=n, always=self.constant,
                         admitted_by="" if self.constant else "lexical", lexical=0.0 if self.constant else 1.0,
                         matched_terms=(self.key,) if self.key else ())


@lru_cache(maxsize=4096)
def key_pattern(key: str) -> re.Pattern | None:
    """The compiled matcher for one key; None for a key that cannot match."""
    key = key.strip()
    if not key:
        return None
    found = _REGEX_KEY.match(key)
    if found:
        flags = 0
        for letter in found.group(2):
            flags |= _FLAGS[letter]
        try:
            return re.compile(found.group(1), flags)
        except re.error:
            pass  # not a valid expression: the key is taken literally, as written
    return re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)", re.IGNORECASE)


def _first_key(card: Card, text: str) -> str:
    for key in card.keys:
        pattern = key_pattern(key)
        if pattern is not None and pattern.search(text):
            return key
    return ""


def fired_cards(cards: Iterable[Card], recent_texts: Sequence[str], pending: str = "") -> list[Fired]:
    """Constant cards first (in card order), then cards the input names, then
    cards the story names, nearest first. `recent_texts` is oldest first, as
    the story reads; only its last SCAN_DEPTH texts are scanned."""
    scanned = [t for t in list(recent_texts)[-SCAN_DEPTH:][::-1] if t]
    out: list[Fired] = []
    for card in cards:
        if not card.enabled or not card.entry.strip():
            continue
        base = dict(card_id=card.id, title=card.title, text=card.entry, card_type=card.card_type, origin=card.origin)
        if card.constant:
            out.append(Fired(**base, found_in="always"))
            continue
        key = _first_key(card, pending) if pending else ""
        if key:
            out.append(Fired(**base, found_in="input", key=key))
            continue
        for distance, text in enumerate(scanned):
            key = _first_key(card, text)
            if key:
                out.append(Fired(**base, found_in="story", key=key, distance=distance))
                break
    order = {"always": 0, "input": 1, "story": 2}
    return sorted(out, key=lambda f: (order[f.found_in], f.distance, f.card_id))


def lore_for(session: Session, campaign_id: int, recent_texts: Sequence[str], pending: str = "") -> list[Fired]:
    """The campaign's cards that fire for a turn whose story ends with
    `recent_texts` (oldest first) and whose input is `pending`."""
    rows = session.scalars(select(StoryCardRow).where(StoryCardRow.campaign_id == campaign_id,
                                                      StoryCardRow.enabled.is_(True))
                           .order_by(StoryCardRow.id)).all()
    return fired_cards([Card.of(r) for r in rows], recent_texts, pending)
