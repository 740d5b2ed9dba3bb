"""Separating the story from the state block the narrator appends to it.

Two failures matter, and they pull in opposite directions. Protocol left in
the prose is shown to the reader and, worse, replayed as history, so the next
prompt carries a second and older account of the state. Story taken out of
the prose is lost writing. Every rule below therefore anchors on text this
application owns (its fence label, its event names, its section headings, its
hint wording) and never on what prose merely looks like; each has a
look-alike test that must survive untouched.

The reference system measured why this matters: in a 104-turn run with a
small local narrator, the state section was pasted into the prose on 42 turns,
and 10 turns ended inside an unfinished object because the reply hit its
token limit.

`split` runs the finders in the order a reply is read: proposals set apart
(`blocks`), then protocol in the story's lines (`echoes` for a leading label,
`inline`, `pasted`), then the end of the reply trimmed until stable (`trim`,
over the `tail` view, cutting `leftovers` and bracketed `echoes`). What the
narrator is asked to write, and the name of each removal, is in `protocol`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .blocks import take_blocks
from .echoes import leading_label
from .inline import event_call_lines, inline_proposals
from .lines import BLANK_RUN_RE
from .pasted import pasted_sections
from .proposals import Block, events_of, reads_as_protocol
from .protocol import (
    CONTINUE_HINT_PHRASE,
    EMIT_REMINDER,
    EMIT_RULE,
    EMIT_RULE_SHORT,
    LENGTH_HINT_OPENING,
    LENGTH_HINT_TAIL,
    RESTATED_OPENING,
    RULE_DANGLING_JSON,
    RULE_DANGLING_STATE,
    RULE_EMPTY_FENCE,
    RULE_EVENT_CALL,
    RULE_INLINE_PROPOSAL,
    RULE_INSTRUCTION_TAIL,
    RULE_JSON_FENCE,
    RULE_LEADING_LABEL,
    RULE_LENGTH_HINT,
    RULE_PASTED_STATE,
    RULE_QUOTE_MARKER,
    RULE_SCENE_LINE,
    RULE_STATE_FENCE,
    RULE_STATE_HEADING,
    RULE_TRAILING_OBJECT,
    RULE_TRUNCATED_OBJECT,
    RULES,
    SHORT_RULE_WINDOW,
    emit_rule,
)
from .tail import Tail
from .trim import trim

__all__ = [
    "CONTINUE_HINT_PHRASE",
    "EMIT_REMINDER",
    "EMIT_RULE",
    "EMIT_RULE_SHORT",
    "SHORT_RULE_WINDOW",
    "LENGTH_HINT_OPENING",
    "LENGTH_HINT_TAIL",
    "RESTATED_OPENING",
    "RULES",
    "RULE_DANGLING_JSON",
    "RULE_DANGLING_STATE",
    "RULE_EMPTY_FENCE",
    "RULE_EVENT_CALL",
    "RULE_INLINE_PROPOSAL",
    "RULE_INSTRUCTION_TAIL",
    "RULE_JSON_FENCE",
    "RULE_LENGTH_HINT",
    "RULE_PASTED_STATE",
    "RULE_LEADING_LABEL",
    "RULE_QUOTE_MARKER",
    "RULE_SCENE_LINE",
    "RULE_STATE_FENCE",
    "RULE_STATE_HEADING",
    "RULE_TRAILING_OBJECT",
    "RULE_TRUNCATED_OBJECT",
    "Extraction",
    "emit_rule",
    "split",
]


@dataclass(frozen=True)
class Extraction:
    """`events` is None when no readable proposal was found, which is not the
    same as [] (the narrator said nothing changed); `raw_block` keeps what was
    found either way, so an unreadable proposal stays visible to the audit."""

    prose: str
    events: list | None
    raw_block: str
    removals: list[tuple[str, str]] = field(default_factory=list)


# ------------------------------------------------------------ putting it together

class _Cleaner:
    """The reply as the whole-text steps leave it, and each piece taken out, by rule."""

    def __init__(self, text: str):
        self.text = text.strip()
        self.removals: list[tuple[str, str]] = []

    def drop(self, rule: str, step) -> list:
        """Runs a whole-text step, which returns the text and what it removed."""
        text, removed = step(self.text)
        self.text = BLANK_RUN_RE.sub("\n\n", text).strip() if removed else self.text
        self.removals += [(rule, (p.cut if isinstance(p, Block) else p).strip()) for p in removed]
        return removed


def _clean(text: str, *, after_block: bool) -> tuple[str, list[Block], list[tuple[str, str]]]:
    """Removes what the block extraction could not, then trims the tail.

    `after_block` says protocol already came out of this reply, which makes a
    bare scene line at the end part of the same pasted tail.
    """
    cleaner = _Cleaner(text)
    cleaner.drop(RULE_LEADING_LABEL, leading_label)
    cleaner.drop(RULE_EVENT_CALL, event_call_lines)
    inline = cleaner.drop(RULE_INLINE_PROPOSAL, inline_proposals)
    cleaner.drop(RULE_PASTED_STATE, pasted_sections)
    tail = Tail(cleaner.text, cleaner.removals)
    trim(tail, protocol_cut=after_block or bool(cleaner.removals))
    return tail.prefix, inline, tail.removals


def _audit_raw(whole: str, prose: str) -> str:
    """What to keep as the raw block when no proposal was found.

    A removed suffix is kept when it was protocol (an unfinished block, a fence,
    a bracketed instruction); a pasted state section alone is not a proposal,
    so it must not mark the turn as carrying an unreadable one.
    """
    if prose == whole:
        return ""
    if whole.startswith(prose):
        removed = whole[len(prose):].strip()
        keep = reads_as_protocol(removed) or "```" in removed or removed.startswith("[")
        return removed if keep else ""
    return whole if reads_as_protocol(whole) else ""


def _chosen(blocks: list[Block], inline: list[Block]) -> Block | None:
    """The last block of the most explicit kind found, else the last inline one."""
    if blocks:
        return [b for b in blocks if b.rule == blocks[0].rule][-1]
    return inline[-1] if inline else None


def split(text: str) -> Extraction:
    """The story, the proposed events (None when there is no readable proposal),
    the raw block for the audit, and every removal with the rule that made it.

    Nothing here consults the state or an entity: extraction is pure text, so
    the same reply always splits the same way, at write time or on replay.
    """
    whole = (text or "").strip()
    rest, blocks = take_blocks(whole)
    prose, inline, removals = _clean(rest, after_block=bool(blocks))
    chosen = _chosen(blocks, inline)
    removals = [(b.rule, b.cut.strip()) for b in blocks] + removals
    if chosen is None:
        return Extraction(prose, None, _audit_raw(whole, prose), removals)
    return Extraction(prose, events_of(chosen.parsed), chosen.raw, removals)
