"""Trimming the end of a reply until no rule cuts any more.

One leftover hides another (a `State` heading above an unfinished object, a
parroted reminder above an unclosed fence), so the tail rules run in passes
until a pass cuts nothing; and since a pass cuts a leftover or two, stacked
leftovers are cut many passes at once wherever that is provably the same.
"""
from __future__ import annotations

import re

from .echoes import echoed_bracket
from .leftovers import (
    bare_quote_marker,
    dangling_json_fence,
    dangling_state_fence,
    empty_fence_opener,
    trailing_scene_line,
    trailing_state_heading,
    truncated_object,
)
from .lines import rstripped_end
from .protocol import (
    RULE_DANGLING_JSON,
    RULE_DANGLING_STATE,
    RULE_EMPTY_FENCE,
    RULE_QUOTE_MARKER,
    RULE_SCENE_LINE,
    RULE_STATE_HEADING,
    RULE_TRUNCATED_OBJECT,
)
from .tail import LineRun, Tail

__all__ = ["trim"]

# What a tail rule other than the dangling ```json keys on in the last line.
_STIRRING_RE = re.compile(r"[\[\]`>]|state|scene", re.IGNORECASE)
_UNLIKE_AN_OPENING_RE = re.compile(r'[^\s{"evnts]')  # not in an opening `{"events` cut short

# ------------------------------------------------------------ the tail, stacked
# A pass of the tail loop cuts a leftover or two, and 100 KB of one leftover
# stacked over and over is up to 50,000 passes. What follows makes many of
# those passes at once, each only where it can tell they would cut just that:
# a run of lines of one kind, a run of dangling ```json fences, and copies,
# above it, of the block a pass cut. Every cut is still a removal of its own.
_HEADING_RUN = LineRun(r"[ \t>*#_]*(?i:state)[ \t*_:]*")
_QUOTE_RUN = LineRun(r"[^\S\n]*>")
# Scene lines with no bracket or backtick, with and without protocol cut before them.
_SCENE_RUNS = {
    True: LineRun(r"[^\S\n]*Scene: [^\[\]`\n]*[^\s\[\]`]"),
    False: LineRun(r"[^\S\n]*Scene: [^\[\]`\n]*\(at [^()\[\]`\n]+\)"),
}


def _cut_json_fences(tail: Tail, start: int) -> None:
    """Cuts the dangling ```json at `start`, then each one the passes after would cut.

    A pass that cuts a dangling ```json goes on to cut a `State` heading it
    leaves last. While the line left last then holds nothing another rule
    keys on (a bracket, a backtick, a `>`, "state" or "scene"), the next pass
    can only cut the next dangling ```json, so those passes run here without
    asking the other rules, and copies of a block cut so go at once: 100 KB
    of stacked fences is 11,111 passes.
    """
    text = tail.text
    while start is not None:
        end, cuts = tail.end, len(tail.removals)
        tail.cut(start, RULE_DANGLING_JSON)
        line = text.rfind("\n", 0, tail.end) + 1
        if _STIRRING_RE.search(text, line, tail.end):
            if not (line and _HEADING_RUN.line.match(text, line, tail.end) and _is_still(text, line)):
                return  # another rule may fire: back to the pass, whose own rules take it
            tail.cut(line, RULE_STATE_HEADING)
        _cut_copies(tail, end, cuts)
        start = dangling_json_fence(tail)


def _is_still(text: str, line_start: int) -> bool:
    """Whether the line a cut from `line_start` leaves last holds nothing that any
    tail rule but the ```json one keys on."""
    end = rstripped_end(text, line_start)
    return not _STIRRING_RE.search(text, text.rfind("\n", 0, end) + 1, end)


def _read_only_its_block(tail: Tail, before: int) -> bool:
    """Whether the pass just made read nothing but the block it cut (ending at
    `before`) and the block above it, back to a line break, as _cut_copies needs.

    So it did when the block holds no backtick, no closing bracket without
    an opening one, and a character no opening `{"events` cut short holds:
    no fence moved, so the ```state, ```json and empty-fence rules saw less of
    what they had seen, and never such an opening; the bracket rule read the
    block's own bracket or, meeting the line break first, none; the line
    rules read the lines left last; and the flags stay as the pass left them.
    """
    block = tail.text[tail.end:before]
    return "`" not in block and ("[" in block or "]" not in block) and bool(_UNLIKE_AN_OPENING_RE.search(block))


def _cut_copies(tail: Tail, end: int, cuts: int) -> None:
    """Repeats the cut just made (the removals from `cuts` on, of the block that
    ended at `end`) for each copy of that block standing above it.

    The caller knows the cut read nothing but its block and the block above,
    back to that one's last line break. So each copy in turn would be read
    and cut just as this block was, but for the last, whose reading reaches
    past the copies: it is left to the loop.
    """
    block = tail.text[tail.end:end]
    if "\n" not in block:
        return
    repeats = _copies(tail.text, tail.end, block) - 1
    if repeats > 0:
        tail.removals.extend(tail.removals[cuts:] * repeats)
        tail.end -= repeats * len(block)


def _copies(text: str, end: int, block: str) -> int:
    """How many copies of `block` end text[:end], back to back (found by doubling)."""
    count, batch = 0, 1
    while batch:
        stop = end - count * len(block)
        if stop >= batch * len(block) and text.endswith(block * batch, 0, stop):
            count, batch = count + batch, batch * 2
        else:
            batch //= 2
    return count


_TAIL_RULES = (
    (RULE_DANGLING_STATE, dangling_state_fence, None),
    (RULE_DANGLING_JSON, dangling_json_fence, None),
    (RULE_STATE_HEADING, trailing_state_heading, _HEADING_RUN),
    (RULE_QUOTE_MARKER, bare_quote_marker, _QUOTE_RUN),
    (RULE_EMPTY_FENCE, empty_fence_opener, None),
)


def trim(tail: Tail, protocol_cut: bool) -> None:
    """Trims the tail until stable.

    The loop repeats because one leftover hides another: a `State` heading
    sat above an unfinished object, and a parroted reminder above an unclosed
    fence.
    """
    instruction_cut = False
    while True:
        before, cuts = tail.end, len(tail.removals)
        instruction_cut = _cut_tail(tail, instruction_cut)
        protocol_cut = protocol_cut or tail.end != before
        start = trailing_scene_line(tail, protocol_cut)
        if start is not None:  # a run only when it is the pass's first cut (see LineRun)
            tail.cut_lines(start, RULE_SCENE_LINE, _SCENE_RUNS[protocol_cut] if tail.end == before else None)
        if tail.end != before:
            if _read_only_its_block(tail, before):
                _cut_copies(tail, before, cuts)
            continue
        # The one rule that reads the whole text runs only once the cheap
        # ones are stable, so stacked leftovers do not each pay for a scan.
        start = truncated_object(tail.prefix)
        if start is None:
            return
        tail.cut(start, RULE_TRUNCATED_OBJECT)
        protocol_cut = True


def _cut_tail(tail: Tail, instruction_cut: bool) -> bool:
    """One pass of the cheap tail rules; whether an instruction has come off."""
    pass_start = tail.end
    bracket = echoed_bracket(tail, instruction_cut)
    if bracket is not None:
        tail.cut(*bracket)
        instruction_cut = True
    for rule, finder, run in _TAIL_RULES:
        start = finder(tail)
        if start is None:
            continue
        if rule == RULE_DANGLING_JSON:
            _cut_json_fences(tail, start)
        else:  # a run only when it is the pass's first cut (see LineRun)
            tail.cut_lines(start, rule, run if tail.end == pass_start else None)
    return instruction_cut
