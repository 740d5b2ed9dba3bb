"""What a proposal leaves at the end of a reply once the rest of it is gone
or was never written: an unclosed fence, a `State` heading, a bare `>`, an
empty fence opener, the renderer's scene line, an object the output limit
cut off.

A reply that hits its token limit ends inside its block (10 of the
reference's 104 turns), and each of these is the part of the protocol that
was left; each is cut only at the very end, and only when it is ours, so
a story that ends on an open code fence or a screenplay's "Scene: Night."
stays.
"""
from __future__ import annotations

import re

from .. import render
from .lines import QUOTE_RE, line_end, line_start
from .proposals import Braces, is_state_heading, last_protocol, looks_json_ish, reads_as_protocol
from .tail import Tail

__all__ = [
    "bare_quote_marker",
    "dangling_json_fence",
    "dangling_state_fence",
    "empty_fence_opener",
    "trailing_scene_line",
    "trailing_state_heading",
    "truncated_object",
]

_KEYWORD_RE = re.compile("events|type", re.IGNORECASE)  # a word every protocol marker holds
# A line opening an object once the quote markers are off.
_BARE_OBJECT_RE = re.compile(r"^[ \t]*\{", re.MULTILINE)
_DANGLING_JSON_RE = re.compile(r"```json\b((?:(?!```).)*)\Z", re.DOTALL | re.IGNORECASE)
_EMPTY_OPENER_RE = re.compile(r"```(?:json)?[ \t]*", re.IGNORECASE)
_SCENE_AT_RE = re.compile(r"\(at [^()\n]+\)\s*$")


def dangling_state_fence(tail: Tail) -> int | None:
    """Our own label opens nothing but protocol, so an unclosed one ends the story."""
    return tail.first_state_opener()


def dangling_json_fence(tail: Tail) -> int | None:
    """An unclosed ```json goes only when what follows is ours: a story may leave code open."""
    # The body holds no fence, so an unclosed opener is the last ``` there is.
    last = tail.last_fence()
    match = _DANGLING_JSON_RE.match(tail.text, last, tail.end) if last >= 0 else None
    if match is None:
        return None
    body = match.group(1).strip()
    cut_at_start = body.startswith("{") and '"events"'.startswith(body[1:].strip())
    return match.start() if cut_at_start or reads_as_protocol(body) else None


def trailing_state_heading(tail: Tail) -> int | None:
    start, line = tail.last_line()
    return start if start is not None and is_state_heading(line) else None


def bare_quote_marker(tail: Tail) -> int | None:
    start, line = tail.last_line()
    return start if start is not None and line.strip() == ">" else None


def empty_fence_opener(tail: Tail) -> int | None:
    """R4: an empty ``` or ```json last line, only when it opens (odd fence count)."""
    start, line = tail.last_line()
    if start is None or not _EMPTY_OPENER_RE.fullmatch(line.strip()):
        return None
    return start if tail.fence_lines() % 2 else None


def trailing_scene_line(tail: Tail, protocol_cut: bool) -> int | None:
    """R3: the renderer's scene line left last, known by its `(at …)` or by company.

    A screenplay's closing "Scene: Night." in a reply with no protocol stays.
    """
    start, line = tail.last_line()
    if start is None or not line.strip().startswith(render.HEADING_SCENE + " "):
        return None
    return start if protocol_cut or _SCENE_AT_RE.search(line) else None


def truncated_object(text: str) -> int | None:
    """The outermost line-start object that never closes and reads as protocol.

    A reply that hits its token limit ends inside its block. Cutting at the
    outer brace matters: the finished event objects inside it close, and a cut
    at the last of them left the list above it in the story. Quote markers
    come off every line first, as a quoted block was truncated too. Only an
    object opening before the last marker can be cut, so without one nothing
    is walked.
    """
    if "{" not in text or not _KEYWORD_RE.search(text):
        return None  # no object, or no marker (taking quote markers off makes no word): nothing to cut
    body = QUOTE_RE.sub("", text)
    braces, last_marker, resume = Braces(body), last_protocol(body), 0
    for match in _BARE_OBJECT_RE.finditer(body):
        brace = match.end() - 1
        if brace > last_marker:
            return None
        if brace < resume:
            continue  # inside an object that closed: one of its own events
        closing = braces.end(brace)
        if closing is not None:
            resume = closing
        elif looks_json_ish(body[brace + 1:line_end(body, brace)]):
            return line_start(text, body.count("\n", 0, brace))
    return None
