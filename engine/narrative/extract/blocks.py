"""Proposals set apart from the story: a ```state fence, a ```json or bare
fence, and an object closing the reply.

These come out first, and in that order, because each is more explicit than
the next: the label we asked for outranks a fence a narrator chose, which
outranks an object merely ending the reply. Finding them before the prose is
cleaned keeps a fenced proposal whole where a line rule would cut it apart.
"""
from __future__ import annotations

import re

from .lines import remove_spans
from .proposals import Block, Braces, looks_like_proposal, may_be_proposal, reads_as_protocol
from .protocol import RULE_JSON_FENCE, RULE_STATE_FENCE, RULE_TRAILING_OBJECT

__all__ = ["take_blocks"]

# The label must end its line or run straight into the payload: "a ```state
# block" inside a parroted reminder once read as a fence and cut the middle
# out of a reply.
_STATE_FENCE_RE = re.compile(r"```state[^\S\n]*(?:\n|(?=[\[{]))(.*?)```", re.DOTALL | re.IGNORECASE)
_FENCE_TOKEN_RE = re.compile(r"```([A-Za-z]*)")


def _state_fences(text: str) -> list[Block]:
    return [Block.cut_from(RULE_STATE_FENCE, text, m.start(), m.end(), m.group(1)) for m in _STATE_FENCE_RE.finditer(text)]


def _json_fences(text: str) -> list[Block]:
    """Paired ```json or bare fences that hold a proposal; a story's own code stays.

    A body is parsed only if it could hold a proposal, and with no closing
    brace or protocol marker anywhere none can: pairing and parsing 100 KB
    of stacked fences took about 65 ms.
    """
    if "}" not in text and not reads_as_protocol(text):
        return []
    tokens = [t for t in _FENCE_TOKEN_RE.finditer(text) if t.group(1).lower() != "state"]
    found = []
    for opener, closer in zip(tokens[::2], tokens[1::2], strict=False):
        if opener.group(1).lower() not in ("", "json"):
            continue
        block = Block.cut_from(RULE_JSON_FENCE, text, opener.start(), closer.end(), text[opener.end():closer.start()])
        if reads_as_protocol(block.raw) or (may_be_proposal(block.raw) and looks_like_proposal(block.parsed)):
            found.append(block)
    return found


def _trailing_object(text: str) -> list[Block]:
    """The outermost object that closes exactly at the end of the reply, if a proposal."""
    end, braces = len(text.rstrip()), Braces(text)
    if not text.endswith("}", 0, end) or ":" not in text:
        return []  # no object closes there, or none is a proposal: no need to scan every brace
    for match in re.finditer(r"\{", text):
        if braces.end(match.start()) == end:
            start = _line_start_if_bare(text, match.start())
            block = Block.cut_from(RULE_TRAILING_OBJECT, text, start, end, text[match.start():end])
            return [block] if looks_like_proposal(block.parsed) else []
    return []


def _line_start_if_bare(text: str, position: int) -> int:
    """Widens a cut to its line's start when only indentation or a `>` precede it."""
    start = text.rfind("\n", 0, position) + 1
    return start if not text[start:position].strip(" \t>") else position


def take_blocks(text: str) -> tuple[str, list[Block]]:
    """Every fenced or trailing proposal leaves the text, kinds in order of priority.

    A ```state fence is the label we asked for, so it outranks a ```json or
    bare fence, which outranks a bare object closing the reply. Each finder
    reads the text the earlier ones left, so one block is never found twice.
    """
    blocks: list[Block] = []
    for finder in (_state_fences, _json_fences, _trailing_object):
        found = finder(text)
        if found:
            blocks.extend(found)
            text = remove_spans(text, [(b.start, b.end) for b in found])
    return text, blocks
