"""The derived-work runner: what follows a turn's commit (memories, summary,
knowledge vectors), inline or in a thread; and, in a thread of its own, the
next turn's knowledge query embedded ahead (`knowledge.start_prepare`).

Handed to a campaign as a plain callable, so the campaign never calls back
into whoever opened the file. It takes zero-argument callables for the
narrator, embedder and settings because those can be reconfigured between
turns and the next run must use what is configured then.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..knowledge import QUERY_STORY_TEXTS, catch_up, has_sources, start_background, start_prepare
from ..memory.bank import recent_story
from ..memory.derived import run_derived, schedule
from ..store import CampaignRow
from ..story import StoryTree

if TYPE_CHECKING:
    from ..providers import Narrator
    from ..providers.embedders import Embedder
    from ..settings import Settings
    from ..store import Database

__all__ = ["derived_runner", "next_scene"]


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
            # Its own thread, not the derived job's: that job waits for the
            # narrator's memory and summary calls, and is skipped while the
            # last one runs; the next turn's query must be ready before it.
            # Inline runs (experiments) skip it: it changes no result, only
            # which turn pays for embedding the story's paragraphs.
            start_prepare(db, campaign_id, lambda: next_scene(db, campaign_id), embedder=embedder(),
                          settings=settings())
            schedule(db, campaign_id, job)
        else:
            job()

    return run


def next_scene(db: Database, campaign_id: int) -> tuple[list[str], list[str]]:
    """The story texts (oldest first) and standing names the next turn's
    knowledge query will read, read as the turn runner reads them
    (`plan._knowledge`: the head's newest story texts and the names of the
    entities in its state). A drift between the two costs only speed: the
    next turn embeds what was not prepared."""
    with db.reading() as s:
        campaign = s.get(CampaignRow, campaign_id)
        if campaign is None:
            return [], []
        tree = StoryTree(s, campaign)
        end = campaign.head_depth
        path = tree.path(end)
        head = tree.node_at(end, path) if end >= 0 else None
        state = dict(head.state_after or {}) if head is not None else {}
        story = recent_story(s, path, QUERY_STORY_TEXTS)
    names = [e.get("name", "") for e in (state.get("entities") or {}).values() if isinstance(e, dict)]
    return story, [n for n in names if n]
