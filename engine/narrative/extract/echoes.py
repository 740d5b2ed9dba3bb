"""The prompt's own words said back: a label announcing the reply, and one of
our bracketed instructions left at its end.

A small narrator imitates what it was shown, so our instructions come back
as story; each is known by the words of ours it keeps, never by looking like
an instruction, so an in-world "[Hard limit: forty days]" stays.
"""
from __future__ import annotations

import re

from .protocol import (
    CONTINUE_HINT_PHRASE,
    LENGTH_HINT_OPENING,
    RESTATED_OPENING,
    RULE_INSTRUCTION_TAIL,
    RULE_LENGTH_HINT,
)
from .tail import Tail

__all__ = ["echoed_bracket", "leading_label"]

# The hint's wording, in the project's form and the reference's; a narrator
# rewords the front and keeps one of these. "[Hard limit: forty days]" has none.
_HINT_WORDS_RE = re.compile(
    r"must not (?:exceed|run past) \d+ words|stop short of about \d+|state block|well inside (?:that|the) limit",
    re.IGNORECASE,
)
# A bracket closing the reply, or one the output limit cut off before it closed.
_CLOSED_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]\s*\Z")
_OPEN_BRACKET_RE = re.compile(r"\[([^\[\]\n]*)\Z")

# A reply that announces itself ("The next passage is:", "Here is the next
# part of the story:"), with any "> " marker after the label: the 135M
# narrator's imitation of the prompt (a reply of the narration evaluation:
# "The next passage is: >"). Only at the very start, and only the label: the
# story after it stays. (A bare "> " opening is the turn runner's to judge, in
# prose.hold_rules: here it may be a story that quotes an action.)
_LEADING_LABEL = re.compile(
    r"\A\s*(?:here\s+is\s+)?(?:the\s+)?(?:next|following)\s+(?:passage|part|section|scene)"
    r"(?:\s+of\s+the\s+story)?(?:\s+is)?\s*:\s*(?:>\s*)*",
    re.IGNORECASE)


def leading_label(text: str) -> tuple[str, list[str]]:
    found = _LEADING_LABEL.match(text)
    if found is None or not text[found.end():].strip():
        return text, []
    return text[found.end():], [found.group()]


def _is_length_hint(inner: str) -> bool:
    return _opens_like_hint(inner) and bool(_HINT_WORDS_RE.search(inner))


def _opens_like_hint(inner: str) -> bool:
    return inner.lstrip().lower().startswith(LENGTH_HINT_OPENING[1:].lower())


def _is_echoed_instruction(inner: str) -> bool:
    low = inner.lower().strip()
    return (
        "```" in low
        or low.startswith(("reminder:", "continue the story", RESTATED_OPENING[1:].lower()))
        or CONTINUE_HINT_PHRASE.lower() in low
        or _is_length_hint(inner)
        or ("state block" in low and "events list" in low)
    )


def echoed_bracket(tail: Tail, instruction_cut: bool) -> tuple[int, str] | None:
    """R2/R5: a final bracket that is one of our instructions, closed or cut off.

    Once one instruction came off, a bracket merely opening like the length
    hint is taken too: a narrator rewords the rest. On its own, an in-world
    "[Hard limit: forty days]" stays.
    """
    text, end, last = tail.text, tail.end, tail.last_bracket()
    # Neither pattern lets a bracket follow its own, so a match starts at the
    # final "[": a closed one only when the reply ends in "]", an open one
    # only when that "[" is on the last line. Trying both from a "[" far back
    # read the whole text again on every pass.
    if last < 0:
        return None
    if text.endswith("]", 0, end):
        pattern = _CLOSED_BRACKET_RE
    elif last > text.rfind("\n", 0, end):
        pattern = _OPEN_BRACKET_RE
    else:
        return None
    match = pattern.match(text, last, end)
    if match is None:
        return None
    inner = match.group(1)
    if _is_length_hint(inner):
        return match.start(), RULE_LENGTH_HINT
    if _is_echoed_instruction(inner) or (instruction_cut and _opens_like_hint(inner)):
        return match.start(), RULE_INSTRUCTION_TAIL
    return None
