"""Accounting for every field of another tool's file.

A reader names the fields it carries; everything else the source holds (a
value that is not empty) is listed in the report's `not_carried`, with how
many entries had it, so nothing leaves a file without a word. The words for
a known field say what it did in its own tool; an unknown field is named as
it is spelled, so a newer version of a format is still accounted for.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..bundle.plan import Notes
from ..cards import unusable, unusable_keys

__all__ = ["Macros", "account", "report_unusable"]
# Cards named one by one in the unusable-keys warning; the rest are counted.
_NAMED = 12

_EMPTY = (None, "", [], {})


def account(notes: Notes, rows: Iterable[Any], carried: Iterable[str], meanings: Mapping[str, str], what: str) -> None:
    """Add a not-carried line for every field of `rows` outside `carried`."""
    rows = [r for r in rows if isinstance(r, dict)]
    carried = set(carried)
    tally: Counter[str] = Counter()
    for row in rows:
        tally.update(k for k, v in row.items() if k not in carried and not any(v is e or v == e for e in _EMPTY))
    for key, n in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])):
        meaning = meanings.get(key, "")
        where = f"on {n} of {len(rows)} {what}" if len(rows) > 1 or what.endswith("s") else f"in the {what}"
        notes.lose(f"`{key}` {where}" + (f": {meaning}" if meaning else ""))


def report_unusable(notes: Notes, cards: Iterable[Any]) -> None:
    """One warning naming every card whose keys can never fire here (a
    script's syntax), with how many such keys each has: a card imported as
    written would otherwise stay silent forever."""
    per_card: list[tuple[str, int]] = []
    reasons: set[str] = set()
    for card in cards:
        bad = unusable_keys([*card.keys, *card.secondary_keys])
        if bad:
            per_card.append((card.title.strip() or "(untitled)", len(bad)))
            reasons.update(unusable(k) for k in bad)
    if not per_card:
        return
    total = sum(n for _, n in per_card)
    named = ", ".join(f"“{title}” ({n})" for title, n in per_card[:_NAMED])
    more = f", and {len(per_card) - _NAMED} more cards" if len(per_card) > _NAMED else ""
    notes.warnings.append(
        f"{total} key{'s' if total != 1 else ''} on {len(per_card)} card{'s' if len(per_card) != 1 else ''} "
        f"cannot be evaluated here ({'; '.join(sorted(reasons))}) and will never fire: {named}{more}. "
        "Rewrite them as plain words or /regex/ keys to make them fire; story_cards() lists them in "
        "`unusable_keys`.")


class Macros:
    """Chat-tool placeholders in carried text: `{{user}}`, `{{char}}` and
    TavernAI's `<USER>`/`<BOT>` become the names they stand for when those
    are known; every other macro, and one whose name is not known, stays as
    written and is reported with a count."""

    PATTERN = re.compile(r"\{\{\s*([A-Za-z_][\w.:-]*)\s*\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)
    _ALIASES = {"user": "user", "char": "char", "bot": "char"}

    def __init__(self, *, user: str | None = None, char: str | None = None) -> None:
        self.names = {"user": user or None, "char": char or None}
        self.replaced: Counter[str] = Counter()
        self.left: Counter[str] = Counter()

    def __call__(self, text: str) -> str:
        if "{{" not in text and "<" not in text:
            return text
        return self.PATTERN.sub(self._one, text)

    def _one(self, match: re.Match) -> str:
        word = (match.group(1) or match.group(2)).lower()
        role = self._ALIASES.get(word)
        name = self.names.get(role) if role else None
        if name:
            self.replaced[match.group(0)] += 1
            return name
        self.left[match.group(0)] += 1
        return match.group(0)

    def report(self, notes: Notes) -> None:
        if self.replaced:
            notes.warnings.append("Macros replaced with names: " + ", ".join(
                f"{m} → {self.names[self._ALIASES[self._word(m)]]} ({n}×)" for m, n in sorted(self.replaced.items())))
        if self.left:
            advice = (" Pass protagonist=\"...\" to put your character's name for {{user}}."
                      if any(self._word(m) == "user" for m in self.left) else "")
            notes.warnings.append("Macros left as written (this workbench does not expand them): " + ", ".join(
                f"{m} ({n}×)" for m, n in sorted(self.left.items())) + "." + advice)

    def _word(self, macro: str) -> str:
        found = self.PATTERN.fullmatch(macro)
        return (found.group(1) or found.group(2)).lower() if found else ""
