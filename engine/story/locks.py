"""One turn at a time per campaign, within this process.

A second turn (or an Undo, a take switch, a save point) while a turn is being
narrated is refused at once rather than queued: the reader would otherwise
see their click apply to a story that has moved. Across processes, the turn's
commit re-checks that the head has not moved (see `runner`).
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import TurnInProgress

__all__ = ["busy", "campaign_lock"]

_guard = threading.Lock()
_active: set[tuple[str, int]] = set()


@contextmanager
def campaign_lock(database: str, campaign_id: int, doing: str = "change the story") -> Iterator[None]:
    key = (database, campaign_id)
    with _guard:
        if key in _active:
            raise TurnInProgress(
                f"Cannot {doing} now: a turn of this campaign is still being narrated. "
                "Wait for it to finish, or stop it first."
            )
        _active.add(key)
    try:
        yield
    finally:
        with _guard:
            _active.discard(key)


def busy(database: str, campaign_id: int) -> bool:
    with _guard:
        return (database, campaign_id) in _active
