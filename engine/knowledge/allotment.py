"""How much imported text a prompt may carry, and which passages that buys.

Knowledge is chosen before history is sized, and whatever it does not spend
goes back to history. Its limits, from the reference design:
- retrieved passages take at most the tuning's `knowledge_share` of the elastic budget (what
  is left after protected context and the reply): a third holds several
  passages of the chunker's size and leaves most of the window to the story;
- within that, each class has a ceiling, so Reference and Inspiration cannot
  take all of it whatever they score; Canon fills first, Inspiration last;
- always-in-force Canon, which skips relevance entirely, takes at most
  `always_share` of the whole context budget: it is the one place a reader can
  put unbounded text into every prompt.
Whatever does not fit is recorded as dropped, with its cost. Costs are the
framed text's real token counts, headers and separators included, and the
result is re-counted as rendered, so the limits hold exactly.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..budget import tokens
from ..search.classes import CANON, CLASSES, INSPIRATION, REFERENCE
from ..search.results import Retrieved
from .framing import ALWAYS_HEADER, CLASS_HEADERS, SEPARATOR, block, section, volatile_sections

__all__ = ["CLASS_SHARE", "FILL_ORDER", "Allotment", "allot", "passage_cost"]

CLASS_SHARE = {CANON: 1.00, REFERENCE: 0.50, INSPIRATION: 0.25}
FILL_ORDER = CLASSES  # Canon first in line, Inspiration dropped first
OVER_BUDGET = "over the knowledge budget"
OVER_CLASS = "over its class's share of the knowledge budget"
OVER_ALWAYS = "over the always-in-force share of the context budget"


@dataclass(frozen=True)
class Allotment:
    always: tuple[Retrieved, ...]
    chosen: tuple[Retrieved, ...]  # retrieved passages that fit, fill order then rank
    dropped: tuple[tuple[Retrieved, str], ...]
    knowledge_tokens: int  # the retrieved passages' budget
    always_tokens: int  # the always-in-force budget
    spent: int  # what the retrieved sections cost, each with one separator
    always_spent: int


def passage_cost(p: Retrieved) -> int:
    return tokens.count(block(p)) + tokens.count(SEPARATOR)


def _header_cost(header: str) -> int:
    # The header opens the section; the section itself costs one separator
    # where the builder joins it to its neighbours.
    return tokens.count(header) + tokens.count(SEPARATOR)


def _fill(members: Sequence[Retrieved], header: str, cap: int, reason: str):
    kept, dropped, spent = [], [], 0
    for p in members:
        cost = passage_cost(p)
        opening = 0 if kept else _header_cost(header)
        if spent + opening + cost > cap:
            dropped.append((p.with_(cost=cost), reason))
            continue
        kept.append(p.with_(cost=cost))
        spent += opening + cost
    return kept, dropped, spent


def _sections_cost(chosen: Sequence[Retrieved]) -> int:
    return sum(tokens.count(text) + tokens.count(SEPARATOR) for _, text in volatile_sections(chosen))


def _always(always: Sequence[Retrieved], cap: int):
    kept, dropped, _ = _fill(always, ALWAYS_HEADER, cap, OVER_ALWAYS)
    while kept and tokens.count(section(ALWAYS_HEADER, kept)) > cap:  # BPE joins can differ by a token
        dropped.append((kept.pop(), OVER_ALWAYS))
    return kept, dropped, tokens.count(section(ALWAYS_HEADER, kept)) if kept else 0


def allot(ranked: Sequence[Retrieved], *, knowledge_tokens: int, always_tokens: int) -> Allotment:
    """Greedy, skip-and-continue: a passage that does not fit is dropped and
    the next, smaller one may still fit."""
    knowledge_tokens, always_tokens = max(0, int(knowledge_tokens)), max(0, int(always_tokens))
    always, dropped, always_spent = _always([p for p in ranked if p.always], always_tokens)
    chosen: list[Retrieved] = []
    spent = 0
    for cls in FILL_ORDER:
        members = [p for p in ranked if not p.always and p.classification == cls]
        cap = min(knowledge_tokens - spent, int(knowledge_tokens * CLASS_SHARE[cls]))
        reason = OVER_BUDGET if cap == knowledge_tokens - spent else OVER_CLASS
        kept, lost, used = _fill(members, CLASS_HEADERS[cls], max(cap, 0), reason)
        chosen += kept
        dropped += lost
        spent += used
    while chosen and _sections_cost(chosen) > knowledge_tokens:
        dropped.append((chosen.pop(), OVER_BUDGET))
    return Allotment(tuple(always), tuple(chosen), tuple(dropped), knowledge_tokens, always_tokens,
                     _sections_cost(chosen), always_spent)
