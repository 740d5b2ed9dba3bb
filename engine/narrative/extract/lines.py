"""Positions in a reply, found without copying it.

A reply can be 100 KB of stacked leftovers, and every finder asks where a
line ends or what a cut leaves; slicing the text for each answer made the
clean-up quadratic, so these read positions instead.
"""
from __future__ import annotations

import re

__all__ = ["BLANK_RUN_RE", "QUOTE_RE", "line_end", "line_start", "remove_spans", "rstripped_end"]

QUOTE_RE = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
BLANK_RUN_RE = re.compile(r"\n{3,}")


def remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, cursor = [], 0
    for start, end in sorted(spans):
        pieces.append(text[cursor:start])
        cursor = max(cursor, end)
    pieces.append(text[cursor:])
    return BLANK_RUN_RE.sub("\n\n", "".join(pieces))


def line_end(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end == -1 else end


def line_start(text: str, index: int) -> int:
    """Where line `index` (from 0) of the text begins."""
    return len(text) - len(text.split("\n", index)[-1])


def rstripped_end(text: str, end: int) -> int:
    """len(text[:end].rstrip()), read back from `end` instead of copying the text."""
    if end and not text[end - 1].isspace():
        return end
    size = 16
    while end > 0:
        chunk = text[max(end - size, 0):end]
        kept = len(chunk.rstrip())
        if kept:
            return end - len(chunk) + kept
        end, size = end - len(chunk), size * 4
    return 0
