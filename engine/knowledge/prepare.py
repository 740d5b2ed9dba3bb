"""The next turn's query, embedded before the turn.

A turn's knowledge query is the scene: the player's new line, then the newest
story texts, paragraph by paragraph (`query.query_parts`). Everything but the
player's line is known as soon as the reply is stored, so it is embedded
then, off the turn's path, into the query-vector cache (`engine.vectors.QUERIES`),
and the next turn embeds only the line the player types. For the second stage
that is the difference between one all-mpnet-base-v2 pass over a short line
and one more over a story paragraph (see the knowledge docs, "Cost").

What is predicted is an "act" or "direct" turn: the player's line comes
first, glued to the standing names (`scene_query`), and is the one part not
known ahead. A "continue" turn has no line, so its first part is the names
glued to the reply's first paragraph: one part embedded in that turn. A
prediction that misses (a line of several paragraphs, or a story long
enough that the oldest text is cut at another word) costs only the time of
embedding the missed part in the turn: the vectors are the same either way.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..search import stage_vectors
from ..search.calibration import floor_for
from ..search.query import query_parts, scene_query
from ..search.reads import has_sources
from ..search.second_stage import fusion_for, stage_for
from ..search.tuning import DEFAULT
from ..store import Database
from ..vectors import QUERIES

__all__ = ["PLACEHOLDER", "Prepared", "last_prepared", "next_parts", "prepare_query", "start_prepare",
           "wait_prepared"]

log = logging.getLogger(__name__)

# Stands in for the player's next line while the next query is built. One
# short line, as a player's usually is; its length only matters when the
# story texts overflow the query's token cap, and then only to where the
# oldest text is cut (a part the second stage, which reads the first two
# parts, never sees).
PLACEHOLDER = "> You wait."


@dataclass
class Prepared:
    """What one preparation did: parts embedded now (others were held
    already), by which model, and how long it took; or why it did nothing,
    or the error it stopped on (never raised into a turn)."""

    parts: int = 0
    first: int = 0
    second: int = 0
    first_model: str = ""
    second_model: str = ""
    ms: float = 0.0
    note: str = ""
    error: str = ""


def next_parts(story: Sequence[str], names: Sequence[str] = ()) -> list[str]:
    """The query parts the next "act" turn after `story` (its story texts,
    oldest first) will ask, less the one holding the player's line, in
    query order. `names` are the standing names, as the turn passes them."""
    parts = query_parts(scene_query([*story, PLACEHOLDER], [n for n in names if n]))
    return [p for p in parts if PLACEHOLDER not in p]


def prepare_query(db: Database, campaign_id: int, story: Sequence[str], names: Sequence[str] = (), *,
                  embedder, settings) -> Prepared:
    """Embed the next turn's predicted query parts (see `next_parts`) with
    the models that turn will use: the first stage's embedder for every part,
    and the second stage for the parts it reads. Each model is skipped when
    the turn would not embed with it (no calibrated floor; the second stage
    off, a server's /rerank, or its passage vectors still being computed).
    Raises what the embedders raise; `start_prepare` is the caller that keeps
    that from a turn."""
    started = time.perf_counter()
    out = Prepared()
    if embedder is None:
        out.note = "No embedder is configured."
        return out
    out.first_model = embedder.model_id
    tuning = getattr(settings, "tuning", DEFAULT)
    stage = stage_for(settings, embedder.model_id)
    with db.reading() as s:
        if not has_sources(s, campaign_id):
            out.note = "The campaign has no enabled knowledge source."
            return out
        staged = stage is not None and getattr(stage, "needs_vectors", False)
        if staged:
            fused = fusion_for(embedder.model_id, stage.model_id)
            staged = (fused.floor if fused else floor_for(stage.model_id, tuning)) is not None
        if staged:  # a turn embeds its second-stage query only once every candidate has its vector
            done, total = stage_vectors.coverage(s, campaign_id, stage.model_id)
            staged = bool(total) and done >= total
    parts = next_parts(story, names)
    out.parts = len(parts)
    if parts and floor_for(embedder.model_id, tuning) is not None:
        out.first = _embed(embedder, parts)
    if parts and staged:
        out.second_model = stage.model_id
        # the player's line will be the first part, so the stage reads one fewer of these
        out.second = _embed(stage.embedder, parts[:tuning.stage_parts - 1])
    out.ms = round((time.perf_counter() - started) * 1000, 1)
    return out


def _embed(embedder, parts: list[str]) -> int:
    """Parts not held before, embedded into the cache; how many."""
    new = sum(not QUERIES.held(embedder.model_id, p) for p in dict.fromkeys(parts))
    QUERIES.embed(embedder, parts)
    return new


# ---------------------------------------------------------------- background
_threads: dict[tuple[str, int], threading.Thread] = {}
_last: dict[tuple[str, int], Prepared] = {}
_lock = threading.Lock()


def _key(db: Database, campaign_id: int) -> tuple[str, int]:
    return str(db.path), campaign_id


def start_prepare(db: Database, campaign_id: int, scene: Callable[[], tuple[Sequence[str], Sequence[str]]], *,
                  embedder, settings) -> threading.Thread | None:
    """`prepare_query` in a daemon thread, for after a turn's reply is
    stored; `scene()` (read in the thread, off the turn's path) returns the
    story texts and standing names the next turn will read. Any error is
    logged and kept for `last_prepared`, never raised: the next turn then
    embeds its parts itself. One at a time per file and campaign: while one
    runs, another call starts nothing (None), since a preparation still
    running when the next turn ends would only compete with it for the cores."""
    key = _key(db, campaign_id)
    with _lock:
        alive = _threads.get(key)
        if alive is not None and alive.is_alive():
            return None

        def run():
            try:
                story, names = scene()
                done = prepare_query(db, campaign_id, story, names, embedder=embedder, settings=settings)
            except Exception as exc:  # noqa: BLE001 - the next turn embeds its own parts instead
                done = Prepared(error=f"{type(exc).__name__}: {exc}")
                log.warning("Preparing the next turn's knowledge query failed (campaign %s): %s", campaign_id,
                            done.error)
            _last[key] = done

        thread = threading.Thread(target=run, name=f"prepare-query-{campaign_id}", daemon=True)
        _threads[key] = thread
        thread.start()
        return thread


def wait_prepared(db: Database, campaign_id: int, timeout: float | None = None) -> Prepared | None:
    """Wait for the running preparation, if any; what the last one did."""
    with _lock:
        thread = _threads.get(_key(db, campaign_id))
    if thread is not None:
        thread.join(timeout)
    return last_prepared(db, campaign_id)


def last_prepared(db: Database, campaign_id: int) -> Prepared | None:
    return _last.get(_key(db, campaign_id))
