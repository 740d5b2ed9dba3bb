"""The history window: which recent story nodes the prompt carries.

Every inference server caches prompts by exact token prefix. Dropping the
oldest node on every turn rewrites the front of the history and misses the
cache each time: the reference measured 343-350 s per turn at 7.7k prompt
tokens on a 3B model against 6.0 s with the prefix kept. So the oldest
included node snaps to a block boundary and holds for several turns, then
steps by one block.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Protocol

__all__ = ["Line", "HistorySource", "ListHistory", "trim_block", "history_floor", "TRIM_FRACTION", "MIN_TRIM_BLOCK"]

# The dial: one step gives up 1/TRIM_FRACTION of the window. A quarter holds
# the window still for several turns without ever dropping most of the recent
# story at once. Measured at 4 on an 8,192 budget: 124.0 s/turn against
# 362.4 s with trimming off (2.9x).
TRIM_FRACTION = 4
# Never step by less, or the window slides by one node again.
MIN_TRIM_BLOCK = 2


class Line(NamedTuple):
    """One story node as the prompt sees it.

    A named tuple, not a frozen dataclass: a 16k window is ~1,000 lines built
    every turn, and the dataclass's guarded __init__ cost ~1.5 ms of a turn."""

    kind: str
    text: str
    depth: int | None = None


class HistorySource(Protocol):
    """Where the builder reads history from, newest first, only as far as it needs."""

    total: int

    def newest(self, n: int) -> Sequence[Line]:
        """The newest `n` lines, oldest first."""
        ...


class ListHistory:
    """History already in memory (tests, dry runs of short stories)."""

    def __init__(self, lines: Sequence[Line]):
        self.lines = list(lines)
        self.total = len(self.lines)

    def newest(self, n: int) -> Sequence[Line]:
        return self.lines[-n:] if n > 0 else []


def trim_block(history_budget: int, max_output_tokens: int, fraction: int | None = None) -> int:
    """How many nodes one step drops: from settings, not the story, so it holds
    between turns. A reply is bounded by max_output_tokens, and a player line is
    small beside it, so that is the scale of one node."""
    fits = max(1, history_budget // max(1, max_output_tokens))
    return max(MIN_TRIM_BLOCK, fits // (fraction or TRIM_FRACTION))


def history_floor(depths: Sequence[int | None], costs: Sequence[int], budget: int, block: int) -> int | None:
    """The oldest depth to keep: the smallest multiple of `block` from which the
    rest fits. None when everything fits, when nothing does (the caller
    truncates), or when a node has no depth to anchor on."""
    if not depths or any(d is None for d in depths):
        return None
    spent, oldest = 0, None
    for depth, cost in zip(reversed(depths), reversed(costs), strict=True):
        if spent + cost > budget:
            break
        spent += cost
        oldest = depth
    if oldest is None or oldest == depths[0]:
        return None
    block = max(1, block)
    return math.ceil(oldest / block) * block
