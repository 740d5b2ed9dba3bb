"""The derived-work runner: what follows a turn's commit (memories, summary,
knowledge vectors), inline or in a thread.

Handed to a campaign as a plain callable, so the campaign never calls back
into whoever opened the file. It takes zero-argument callables for the
narrator, embedder and settings because those can be reconfigured between
turns and the next run must use what is configured then.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..knowledge import catch_up, has_sources, start_background
from ..memory.derived import run_derived, schedule

if TYPE_CHECKING:
    from ..providers import Narrator
    from ..providers.embedders import Embedder
    from ..settings import Settings
    from ..store import Database

__all__ = ["derived_runner"]


def derived_runner(db: Database, *, narrator: Callable[[], Narrator], embedder: Callable[[], Embedder | None],
                   settings: Callable[[], Settings], background: Callable[[], bool]) -> Callable[[int], None]:
    """A callable that runs one campaign's derived work: in a thread normally,
    inline when `background()` is False (deterministic experiments). Asked at
    each run, like the others, since a notebook may switch it between turns."""

    def run(campaign_id: int) -> None:
        threaded = background()

        def knowledge_step():
            done = catch_up(db, campaign_id, embedder())
            if threaded:  # the second stage's vectors, in their own thread (never in a turn's way)
                start_background(db, campaign_id, settings(), embedder())
            if done.error:
                raise RuntimeError(done.words)
            return done.embedded

        def job():
            with db.reading() as s:  # no library, no knowledge pass (and no status write per turn)
                library = has_sources(s, campaign_id)
            run_derived(db, campaign_id, narrator=narrator(), embedder=embedder(), settings=settings(),
                        knowledge_step=knowledge_step if library else None)

        if threaded:
            schedule(db, campaign_id, job)
        else:
            job()

    return run
