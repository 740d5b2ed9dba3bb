"""Counting stored narrator replies that still carry protocol.

Stored narration is replayed as history, so any state block, pasted state
section, echoed instruction or echoed section label ("The story's premise:")
left in it shows the next prompt an older account of the state, or its own
words as story. The count runs the very cleanup used at write time
over what was stored: a reply leaks when that cleanup would still change it.
The release gate for this count is zero.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .extract import split
from .prose import RULE_PROMPT_LABEL, echoed_prompt

__all__ = ["EXAMPLES", "NARRATOR_KIND", "count_leaks", "replies"]

# Enough for a report to show the variety of shapes without pasting a corpus.
EXAMPLES = 5
# Only the narrator's replies are judged: a player may type anything, JSON included.
NARRATOR_KIND = "narrator"
# An example's removed text is cut here; the id leads to the whole reply.
EXAMPLE_CHARS = 200


def replies(source: Any) -> Iterable[tuple[Any, str]]:
    """(id, stored text) pairs from a bundle, a store-like object, or pairs as given."""
    if isinstance(source, dict):
        return [
            (node.get("id"), node.get("text") or "")
            for node in source.get("nodes") or []
            if isinstance(node, dict) and node.get("kind") == NARRATOR_KIND
        ]
    if hasattr(source, "stored_replies"):
        return source.stored_replies()
    return source


def count_leaks(source: Any) -> dict:
    """`{ai, leaking, ids, examples}` for the replies `source` holds."""
    examined, leaking, examples = 0, [], []
    for reply_id, text in replies(source):
        examined += 1
        result = split(text or "")
        # The prompt's section labels said back ("The story's premise: …") are cleaned at write time by the
        # narration's rules (prose.hold_rules), so a stored reply that still has one leaks too.
        echoes = echoed_prompt(result.prose)[1] or _all_echo(result.prose)
        if result.prose == (text or "").strip() and result.events is None and not echoes:
            continue
        leaking.append(reply_id)
        if len(examples) < EXAMPLES:
            rule, removed = (result.removals[0] if result.removals else
                             (RULE_PROMPT_LABEL, echoes[0]) if echoes else ("proposal", result.raw_block))
            examples.append({"id": reply_id, "rule": rule, "text": removed[:EXAMPLE_CHARS]})
    return {"ai": examined, "leaking": len(leaking), "ids": _sorted(leaking), "examples": examples}


def _all_echo(text: str) -> list[str]:
    """A reply that is nothing but a label's sentence (echoed_prompt keeps it whole)."""
    cleaned, removed = echoed_prompt(text + "\n\nx")
    return removed if cleaned == "x" else []


def _sorted(ids: list) -> list:
    try:
        return sorted(ids)
    except TypeError:  # ids of mixed kinds, e.g. from a hand-made bundle
        return sorted(ids, key=str)
