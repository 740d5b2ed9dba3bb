"""A copy of the rendered state section pasted into the story, or imitated.

The prompt shows the narrator the state under our own headings, and a small
narrator writes it back (the reference's 104-turn run: pasted on 42 turns).
Replayed as history it would be a second, older account of the state, so a
run of our headings goes; a lone heading-like word in the story stays.
"""
from __future__ import annotations

import re

from .. import render
from .lines import BLANK_RUN_RE, QUOTE_RE

__all__ = ["pasted_sections"]

_DECORATION_RE = re.compile(r"^[\s#>*_]+|[\s*_]+$")
# A whole line that _section_heading takes for one of ours, to find in one search.
_SECTION_LINE_RE = re.compile(
    rf"^(?:[^\S\n]|[#>*_])*(?:{'|'.join(map(re.escape, render.SECTION_HEADINGS))})(?:[^\S\n]|[*_])*$", re.MULTILINE
)


def _section_heading(line: str) -> str | None:
    bare = _DECORATION_RE.sub("", line)
    return bare if bare in render.SECTION_HEADINGS else None


def _is_scene_line(line: str) -> bool:
    bare = _DECORATION_RE.sub("", line)
    return bare == render.HEADING_SCENE or bare.startswith(render.HEADING_SCENE + " ")


def _scene_above(lines: list[str], index: int) -> int | None:
    above = index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    return above if above >= 0 and _is_scene_line(lines[above]) else None


def _is_entry(line: str) -> bool:
    """An indented line under a heading, also when the whole paste was `>`-quoted."""
    bare = QUOTE_RE.sub("", line, count=1)
    return bool(bare.strip()) and bare[:1] in (" ", "\t")


def _pasted_block(lines: list[str], first: int) -> tuple[int, int, bool]:
    """(start, last line, whether it qualifies) for a run opening with a heading.

    It qualifies with two headings, a heading under a scene line, or a heading
    with an indented entry; a lone "Held:" followed by prose is story.
    """
    scene = _scene_above(lines, first)
    headings, entries, last = set(), 0, first
    for index in range(first, len(lines)):
        heading = _section_heading(lines[index])
        if heading or _is_entry(lines[index]):
            headings.update([heading] if heading else [])
            entries += 0 if heading else 1
            last = index
        elif lines[index].strip():
            break
    qualifies = len(headings) >= 2 or scene is not None or entries > 0
    return (first if scene is None else scene), last, qualifies


def pasted_sections(text: str) -> tuple[str, list[str]]:
    """A copy of the rendered state section, pasted or imitated, keyed on our headings.

    A reply holding none of our headings anywhere is settled without reading a line.
    """
    if not any(heading in text for heading in render.SECTION_HEADINGS) or not _SECTION_LINE_RE.search(text):
        return text, []
    lines = text.split("\n")
    drop, removed, index = set(), [], 0
    while index < len(lines):
        if _section_heading(lines[index]) is None:
            index += 1
            continue
        start, last, qualifies = _pasted_block(lines, index)
        if qualifies:
            drop.update(range(start, last + 1))
            removed.append("\n".join(lines[start:last + 1]))
        index = last + 1
    if not removed:
        return text, []
    return BLANK_RUN_RE.sub("\n\n", "\n".join(x for i, x in enumerate(lines) if i not in drop)), removed
