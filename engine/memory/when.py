"""Story time: the date or in-world time a line of the story states, carried
by every line after it, and relative times ("yesterday", "last week")
written out against it.

Why: a line recalled on its own, hundreds of turns later, has lost the
session heading above it, so "I went to the support group yesterday" can
no longer answer "when did she go?". On the issue's long-conversation
benchmark (19 dated sessions) the project's prompt held the answer to 9 %
of temporal questions and three raw lines by word overlap to none: the
date was never in any unit. Now each unit carries the stamp in force where
it was said, and a relative day is resolved against it.

What sets the time: a line that is not someone's speech and either is
short (a heading, a dated session line) or opens with the date ("On 8 May
2023 the fleet sailed"); and a narrated jump at a line's start ("The next
morning, …", "Three days later"), which moves a known date on, or becomes
the label itself when no date is known. A date inside speech ("I was born
on 3 May 1990") is what someone said, not the story's time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = ["Stamp", "advance", "resolve", "stated", "fmt", "HEADING_WORDS"]

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_CLOCK = re.compile(r"\b(\d{1,2}[:.]\d{2}\s*(?:[ap]\.?m\.?)?)", re.I)
# A heading or a session line is short; a longer line sets the time only when the date opens it.
HEADING_WORDS = 14
OPENING_WORDS = 6
_SPEECH = re.compile(r"^\s*(?:>\s*)?(?:[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2}\s*:\s*[\"“]|you say\b|i say\b)",
                     re.I)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "several": 3, "a few": 3, "few": 3}
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
_JUMP = re.compile(r"^\s*(?:>\s*)?(?:(the next|the following|next)\s+(morning|day|evening|night|week|month|year)"
                   r"|(a|an|one|two|three|four|five|six|seven|eight|nine|ten|several|a few|\d+)\s+"
                   r"(days?|weeks?|months?|years?)\s+later"
                   r"|(that|this)\s+(evening|night|afternoon|morning))\b", re.I)
_DAY_LABEL = re.compile(r"^\s*(?:#+\s*)?((?:day|chapter|session|part|week|year)\s+[\dIVXLC]+\b[^\n]{0,60})", re.I)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class Stamp:
    """The time in force: a calendar date when one is known, and its label."""

    label: str
    day: date | None = None
    clock: str = ""


def fmt(day: date) -> str:
    return f"{day.day} {MONTHS[day.month - 1].title()} {day.year}"


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name.lower()[:3]))


def _date_in(text: str) -> tuple[date, int] | None:
    """The first calendar date the text names, and where it starts."""
    found = []
    for m in _DAY_FIRST.finditer(text):
        found.append((m.start(), int(m.group(3)), _month(m.group(2)), int(m.group(1))))
    for m in _MONTH_FIRST.finditer(text):
        found.append((m.start(), int(m.group(3)), _month(m.group(1)), int(m.group(2))))
    for m in _ISO.finditer(text):
        found.append((m.start(), int(m.group(1)), int(m.group(2)), int(m.group(3))))
    for start, year, month, day in sorted(found):
        try:
            return date(year, month, day), start
        except ValueError:
            continue
    return None


def stated(text: str, kind: str = "narrator") -> Stamp | None:
    """The absolute time `text` sets for the story, if it sets one."""
    text = (text or "").strip()
    if not text or kind == "direction" or _SPEECH.match(text):
        return None
    found = _date_in(text)
    words = len(text.split())
    if found is not None:
        day, start = found
        if words <= HEADING_WORDS or len(text[:start].split()) <= OPENING_WORDS:
            clock = _CLOCK.search(text[:start + 40])
            return Stamp(fmt(day), day, clock.group(1).strip() if clock else "")
        return None
    heading = _DAY_LABEL.match(text)
    if heading and words <= HEADING_WORDS:
        return Stamp(" ".join(heading.group(1).split()).rstrip(".:—-– "))
    return None


def advance(before: Stamp | None, text: str, kind: str = "narrator") -> Stamp | None:
    """The time in force after a line: what it states, a jump it narrates
    from the time before, or the time before unchanged."""
    now = stated(text, kind)
    if now is not None:
        return now
    if kind == "direction" or _SPEECH.match(text or ""):
        return before
    jump = _JUMP.match(text or "")
    if jump is None:
        return before
    phrase = " ".join(jump.group(0).split()).lstrip("> ").lower()
    days = 0
    if jump.group(2):
        unit = jump.group(2).lower()
        days = {"morning": 1, "day": 1, "evening": 0, "night": 0, "week": 7, "month": 30, "year": 365}[unit]
        if jump.group(1).lower() != "the next" and unit in ("evening", "night"):
            days = 1
    elif jump.group(4):
        count = jump.group(3).lower()
        days = (int(count) if count.isdigit() else _NUMBERS.get(count, 1)) * _UNITS[jump.group(4).lower()]
    if before is not None and before.day is not None:
        day = before.day + timedelta(days=days)
        return Stamp(fmt(day), day)
    if before is not None and days == 0:
        return before
    return Stamp(f"{before.label}, {phrase}" if before is not None else phrase)


_RELATIVE = re.compile(r"\b(the day before yesterday|yesterday|today|tonight|this morning|this afternoon|"
                       r"this evening|last night|last (?:week|weekend|month|year)|next (?:week|month|year)|"
                       r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+) (?:days?|weeks?|months?|"
                       r"years?) ago|last (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b", re.I)


def _written(phrase: str, day: date) -> str:
    p = phrase.lower()
    if p == "yesterday" or p == "last night":
        return fmt(day - timedelta(days=1))
    if p == "the day before yesterday":
        return fmt(day - timedelta(days=2))
    if p in ("today", "tonight", "this morning", "this afternoon", "this evening"):
        return fmt(day)
    if p in ("last week", "last weekend"):
        return f"the {p.split()[1]} before {fmt(day)}"
    if p == "last month":
        first = day.replace(day=1) - timedelta(days=1)
        return f"{MONTHS[first.month - 1].title()} {first.year}"
    if p == "last year":
        return str(day.year - 1)
    if p.startswith("next "):
        return f"the {p.split()[1]} after {fmt(day)}"
    if p.startswith("last "):
        return f"the {p.split()[1].title()} before {fmt(day)}"
    count, unit = p.split()[:2]
    n = int(count) if count.isdigit() else _NUMBERS.get(count, 1)
    if unit.startswith("year"):
        return str(day.year - n)
    return fmt(day - timedelta(days=n * _UNITS[unit if unit.endswith("s") else unit + "s"]))


def resolve(text: str, stamp: Stamp | None) -> str:
    """`text` with each relative day it names followed by the date it means
    ("yesterday (7 May 2023)"), when the time in force has a date."""
    if stamp is None or stamp.day is None or not text:
        return text
    return _RELATIVE.sub(lambda m: f"{m.group(0)} ({_written(m.group(0), stamp.day)})", text)
