"""Playing on past refused turns, as a reader presses Retry.

A small model sometimes answers with nothing but protocol; the engine then
refuses the turn and writes nothing. Experiment drivers try such a turn
again, a bounded number of times, and say how often it happened.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from engine import TurnFailed

__all__ = ["ATTEMPTS", "until_accepted"]

ATTEMPTS = 3
T = TypeVar("T")


def until_accepted(turn: Callable[[], T], *, attempts: int = ATTEMPTS, refused: list[str] | None = None,
                   required: bool = True) -> T | None:
    """`turn()` until the engine accepts it. Each refusal's message is appended
    to `refused`; after the last attempt the refusal is raised if `required`,
    else None is returned."""
    for attempt in range(attempts):
        try:
            return turn()
        except TurnFailed as exc:
            if refused is not None:
                refused.append(str(exc))
            if attempt == attempts - 1 and required:
                raise
    return None
