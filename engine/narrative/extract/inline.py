"""Protocol written into the story's own lines: calls to our events, and
proposals on lines of their own, quoted with `>` or not, anywhere in a reply.

A small narrator imitates the prompt's `> ` lines and writes its proposal
inside the story as often as after it; these are keyed on our event names
and on an object that parses as our events, so a story's own braces and
function-like words stay.
"""
from __future__ import annotations

import re

from .lines import QUOTE_RE, line_end, remove_spans
from .proposals import (
    EVENT_NAMES,
    Block,
    Braces,
    is_state_heading,
    last_protocol,
    looks_like_proposal,
    may_be_proposal,
    tolerant_load,
)
from .protocol import RULE_INLINE_PROPOSAL

__all__ = ["event_call_lines", "inline_proposals"]

_EVENT_CALL_RE = re.compile(rf"^[ \t]*(?:>[ \t]*)?(?:{EVENT_NAMES})[ \t]*\(", re.IGNORECASE | re.MULTILINE)
# A line opening an object, quoted or not, that could be a proposal. A line
# whose object closes on it with no quote or colon inside, as `> {}` or
# `{ x }`, is passed over: it holds no key, so it is no proposal and ends
# nothing, and 100 KB of `> {}` lines took 0.13 s read one by one.
_OBJECT_LINE_RE = re.compile(r'^[ \t]*(?:>[ \t]*)?\{(?![^\n{}"\\:]*\})', re.MULTILINE)
_SPECIAL_RE = re.compile(r'[{}"\\]')


def event_call_lines(text: str) -> tuple[str, list[str]]:
    """R1: whole lines opening with a call to one of our events, outside code fences.

    The names come from SPECS, so a story's own `open_door(north)` is no match.
    One search settles the usual reply, which has none.
    """
    if "(" not in text or not _EVENT_CALL_RE.search(text):
        return text, []
    kept, removed, in_fence = [], [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and _EVENT_CALL_RE.match(line):
            removed.append(line)
            continue
        kept.append(line)
    return "\n".join(kept), removed


def _heading_above(text: str, line_start: int) -> int:
    """Widens a cut upwards over a bare `State` heading written just above it."""
    end = line_start  # as text[:line_start].rstrip(), without copying the text before every block
    while end > 0 and text[end - 1].isspace():
        end -= 1
    start = text.rfind("\n", 0, end) + 1
    return start if end and is_state_heading(text[start:end]) else line_start


def _quoted_run(text: str, start: int) -> list[tuple[int, int]]:
    """The spans of the consecutive `>`-quoted lines from `start`."""
    spans = []
    while start < len(text):
        end = line_end(text, start)
        if not QUOTE_RE.match(text[start:end]):
            break
        spans.append((start, end))
        start = end + 1
    return spans


def _quoted_object(text: str, start: int) -> tuple[list[tuple[int, int]], str, int | None]:
    """(the quoted lines read, their text with the markers off, just past the
    closing brace in it or None) for an object opening a `>`-quoted line.

    Lines are read only until the object closes: reading the whole quoted run
    for every object in it was quadratic (100 KB of `> {}` lines never ended).
    """
    spans, lines, scan = [], [], _CloseScan()
    closing, offset = None, 0
    while start < len(text) and closing is None:
        end = line_end(text, start)
        if not QUOTE_RE.match(text[start:end]):
            break
        line = QUOTE_RE.sub("", text[start:end], count=1)
        spans.append((start, end))
        lines.append(line)
        found = scan.feed(line, line.find("{") if len(lines) == 1 else 0)
        closing = None if found is None else offset + found
        offset += len(line) + 1
        start = end + 1
    if closing is None:
        spans += _quoted_run(text, start)  # unclosed: the rest of the run goes with it
        lines += [QUOTE_RE.sub("", text[a:b], count=1) for a, b in spans[len(lines):]]
    return spans, "\n".join(lines), closing


class _CloseScan:
    """Where an object closes, read a line at a time by exactly the rules of `Braces`."""

    def __init__(self) -> None:
        self.depth, self.in_string = 0, False

    def feed(self, line: str, start: int) -> int | None:
        """Just past the closing brace within `line`, or None when still open.
        (A backslash ending a line escapes the newline, which is no special character.)"""
        skip = -1
        for match in _SPECIAL_RE.finditer(line, max(start, 0)):
            char, position = match.group(), match.start()
            if position == skip:
                continue  # the character after a backslash
            if self.in_string:
                skip = position + 1 if char == "\\" else skip
                self.in_string = char != '"'
            elif char == '"':
                self.in_string = True
            elif char == "{":
                self.depth += 1
            elif char == "}" and self.depth:
                self.depth -= 1
                if not self.depth:
                    return match.end()
        return None


def _line_object(text: str, line_start: int, braces: Braces) -> tuple[bool, Block | None, int]:
    """(closed, the block if it is a proposal on lines of its own, where the examined region ends).

    A quoted object is read with its `>` markers off, across its run of quoted
    lines; an unclosed quoted object takes its whole run with it.
    """
    quoted = QUOTE_RE.match(text, line_start) is not None
    spans, body, closing = _quoted_object(text, line_start) if quoted else ([], "", None)
    if spans:
        opening = body.find("{")
        if closing is None:
            return False, None, spans[-1][1]
        end = spans[-1][1]
    else:
        body, opening = text, text.find("{", line_start)
        closing = braces.end(opening)
        if closing is None:
            return False, None, line_end(text, line_start)
        end = line_end(text, closing)
    raw = body[opening:closing].strip()
    if body[closing:line_end(body, closing)].strip() or not may_be_proposal(raw):
        return True, None, end  # prose after the brace (a story's own braces), or no key at all
    parsed = tolerant_load(raw)
    if not looks_like_proposal(parsed):
        return True, None, end
    start = _heading_above(text, line_start)
    return True, Block(RULE_INLINE_PROPOSAL, start, end, raw, text[start:end], parsed), end


def inline_proposals(text: str) -> tuple[str, list[Block]]:
    """Unfenced proposals on their own lines, quoted or not, anywhere in the reply.

    Outermost first: a proposal's own event objects open lines too, and one of
    them must never pass for the whole proposal. An unclosed object with
    protocol after it ends the search, since everything after it lies inside it.
    Past both the last closing brace and the last marker no object can close
    or end the search, so the lines there are not read at all.
    """
    braces, last_marker = Braces(text), last_protocol(text)
    horizon = max(last_marker, text.rfind("}"))
    found, skip_until = [], 0
    for match in _OBJECT_LINE_RE.finditer(text) if horizon >= 0 else ():
        if match.start() > horizon:
            break
        if match.start() < skip_until:
            continue
        closed, block, skip_until = _line_object(text, match.start(), braces)
        if not closed and match.start() <= last_marker:
            break
        if block is not None:
            found.append(block)
    if not found:
        return text, []
    whole_lines = [(b.start, b.end + text.startswith("\n", b.end)) for b in found]
    return remove_spans(text, whole_lines), found
