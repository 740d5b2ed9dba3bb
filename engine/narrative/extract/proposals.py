"""What a proposal is, and reading one as a small model wrote it.

Every finder asks the same two questions of a candidate (does it parse,
forgiving a small model's slips, and is what it holds our events?) and
where an object closes; answering them once here keeps each finder's rule
about where to look, and one reply is never read two ways.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..events import SPECS, is_event_type

__all__ = [
    "EVENT_NAMES",
    "MAX_LITERAL_CHARS",
    "Block",
    "Braces",
    "events_of",
    "is_state_heading",
    "last_protocol",
    "looks_json_ish",
    "looks_like_proposal",
    "may_be_proposal",
    "reads_as_protocol",
    "tolerant_load",
]

# Our event names as alternatives of a pattern: what marks text as ours.
EVENT_NAMES = "|".join(re.escape(name) for name in SPECS)
_PROTOCOL_RE = re.compile(rf"""["']events["']\s*:|["']type["']\s*:\s*["'](?:{EVENT_NAMES})["']""", re.IGNORECASE)
_STATE_HEADING_RE = re.compile(r"^[ \t>*#_]*state[ \t*_:]*$", re.IGNORECASE)
# Everything up to the next brace outside a string, then that brace: a string
# is passed over whole, so a scan takes a step per brace, not per character.
# Possessive, so a string never closed ends the scan instead of being re-read.
_NEXT_BRACE_RE = re.compile(r'(?:[^{}"]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+([{}])', re.DOTALL)
_DECODER = json.JSONDecoder()
# A state block is a few hundred characters; Python's literal parser is only
# tried below this size, so a pathological reply cannot make it crawl.
MAX_LITERAL_CHARS = 20_000


def tolerant_load(raw: str) -> Any:
    """Parses what a small model wrote, forgiving the slips small models make.

    Trailing commas, typographic quotes, a note after the object and Python's
    single quotes are each cheap to forgive, and a proposal lost to one of them
    is a turn's state lost; anything worse is None, and the raw text is kept.
    """
    text = raw.strip()
    if not text:
        return None
    for candidate in _forgiven(text):
        try:
            return _DECODER.raw_decode(candidate)[0]
        except ValueError:
            pass
    try:
        return ast.literal_eval(text) if len(text) < MAX_LITERAL_CHARS else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _forgiven(text: str):
    """The text, then with typographic quotes straightened, then also without trailing
    commas: each made only if the one before failed to parse."""
    yield text
    straight = text.replace("“", '"').replace("”", '"')
    yield straight
    yield re.sub(r",\s*([}\]])", r"\1", straight)


def _is_event(item: Any) -> bool:
    return isinstance(item, dict) and is_event_type(item.get("type"))


def looks_like_proposal(parsed: Any) -> bool:
    if isinstance(parsed, dict):
        return isinstance(parsed.get("events"), list) or _is_event(parsed)
    return isinstance(parsed, list) and bool(parsed) and all(map(_is_event, parsed))


def may_be_proposal(raw: str) -> bool:
    """Whether parsing `raw` could find a proposal: every one holds a key and a closing brace."""
    return ":" in raw and "}" in raw


def events_of(parsed: Any) -> list | None:
    if isinstance(parsed, dict) and isinstance(parsed.get("events"), list):
        return list(parsed["events"])
    if _is_event(parsed):
        return [parsed]
    if isinstance(parsed, list) and all(isinstance(item, dict) for item in parsed):
        return list(parsed)
    return None


def reads_as_protocol(text: str) -> bool:
    return bool(_PROTOCOL_RE.search(text))


def last_protocol(text: str) -> int:
    """Where the last protocol marker starts, so "does protocol follow?" costs nothing."""
    return max((m.start() for m in _PROTOCOL_RE.finditer(text)), default=-1)


class Braces:
    """Where each object in a text closes, found in as few passes as possible.

    A scan that meets a `{` outside any string is, from there on, in exactly
    the state a fresh scan from that brace would be in, so one pass answers
    for every brace it meets outside strings; only a brace it saw inside a
    string needs a pass of its own. Scanning afresh from every candidate was
    quadratic: 3 s for a 16 KB reply of brace lines.
    """

    def __init__(self, text: str):
        self.text = text
        self.known: dict[int, int | None] = {}

    def end(self, start: int) -> int | None:
        """Just past the brace closing the object opened at `start`, or None."""
        if start not in self.known:
            self._scan(start)
        return self.known[start]

    def _scan(self, start: int) -> None:
        stack: list[int] = []
        position = start
        while match := _NEXT_BRACE_RE.match(self.text, position):
            position = match.end()
            if match.group(1) == "{":
                stack.append(position - 1)
            elif stack:
                self.known[stack.pop()] = position
        self.known.update(dict.fromkeys(stack))
        self.known.setdefault(start, None)


_UNREAD = object()


@dataclass
class Block:
    """One proposal found in the text: where it sat, what it said, what came out."""

    rule: str
    start: int
    end: int
    raw: str
    cut: str
    _parsed: Any = field(default=_UNREAD, repr=False)

    @property
    def parsed(self) -> Any:
        """Parsed when first asked: of 100 KB of stacked fences only the chosen one ever is."""
        if self._parsed is _UNREAD:
            self._parsed = tolerant_load(self.raw)
        return self._parsed

    @classmethod
    def cut_from(cls, rule: str, text: str, start: int, end: int, raw: str) -> Block:
        """The block text[start:end], whose proposal is `raw`."""
        return cls(rule, start, end, raw.strip(), text[start:end])


def is_state_heading(line: str) -> bool:
    return bool(_STATE_HEADING_RE.match(line))


def looks_json_ish(rest_of_line: str) -> bool:
    """Whether an unclosed `{` line opens JSON rather than a story's stray brace."""
    rest = rest_of_line.strip()
    return not rest or rest[0] in "\"'{[" or reads_as_protocol(rest)
