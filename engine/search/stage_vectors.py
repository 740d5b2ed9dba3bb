"""Second-stage passage vectors: computed ahead of play, shared, never in a turn.

A stronger embedding model (all-mpnet-base-v2: about 1-5 passages a second
on a busy 2-core machine) cannot embed a library during a turn, so its
passage vectors are derived work done after import, batch by batch, each
batch committed (finished work survives a failure), with progress shown.

They are keyed by model and passage content hash (heading trail and text),
not by passage row: every campaign of the file whose source yields the same
passage shares one vector, and a reindex that gives a passage back
unchanged keeps it. A turn reads the vectors of its few dozen candidates
only, by hash.

`start` runs a pass in a background thread, at most one per (file,
campaign, model); `progress` says how far it has got, and what stopped it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, exists, func, select
from tqdm.auto import tqdm

from ..store import Database
from ..store.knowledge_tables import KnowledgePassageRow, KnowledgeSourceRow, KnowledgeStageVectorRow
from ..store.models import utcnow
from .lexical import index_line
from .results import EmbeddingPass
from .vectors import pack, unit, unpack

__all__ = ["BATCH", "StagePass", "catch_up", "coverage", "last_error", "library_matrix", "prune", "running", "start",
           "store_vectors", "vectors_for", "wait"]

# Passages per embedding call and per commit: at ~1 passage a second a batch
# of 16 is committed every 10-20 s, so little is lost to a stop.
BATCH = 16
_threads: dict[tuple, threading.Thread] = {}
_errors: dict[tuple, str] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class StagePass(EmbeddingPass):
    """A first-stage pass's figures, said as the second stage's."""

    @property
    def words(self) -> str:
        if self.error:
            return (f"The second stage ({self.model}) stopped after {self.embedded} passage(s): "
                    f"{self.error.rstrip('.')}. {self.remaining} remain; the first stage is unaffected.")
        return (f"Second stage ({self.model}): {self.embedded} passage(s) embedded, "
                f"{self.remaining} remaining.")


def _live(campaign_id: int):
    return (select(KnowledgePassageRow.content_hash, KnowledgePassageRow.heading, KnowledgePassageRow.text)
            .join(KnowledgeSourceRow, KnowledgeSourceRow.id == KnowledgePassageRow.source_id)
            .where(KnowledgePassageRow.campaign_id == campaign_id, KnowledgeSourceRow.enabled.is_(True),
                   KnowledgeSourceRow.index_state == "ready"))


def _has_vector(model: str):
    return exists().where(KnowledgeStageVectorRow.model == model,
                          KnowledgeStageVectorRow.content_hash == KnowledgePassageRow.content_hash)


def coverage(session, campaign_id: int, model: str) -> tuple[int, int]:
    """(live passages with a second-stage vector, live passages)."""
    live = _live(campaign_id).subquery()
    total = session.scalar(select(func.count()).select_from(live)) or 0
    done = session.scalar(select(func.count()).select_from(
        _live(campaign_id).where(_has_vector(model)).subquery())) or 0
    return int(done), int(total)


def _pending(session, campaign_id: int, model: str, limit: int | None) -> list[tuple[str, str]]:
    """(content hash, embedded line) of passages without a vector, one per hash, in library order."""
    query = _live(campaign_id).where(~_has_vector(model)).order_by(KnowledgePassageRow.id)
    out: dict[str, str] = {}
    for digest, heading, text in session.execute(query):
        if digest not in out:
            out[digest] = index_line(heading, text)
            if limit and len(out) >= limit:
                break
    return list(out.items())


def store_vectors(db: Database, model: str, batch: list[tuple[str, str]], vectors) -> int:
    with db.writing() as s:
        held = set(s.scalars(select(KnowledgeStageVectorRow.content_hash).where(
            KnowledgeStageVectorRow.model == model,
            KnowledgeStageVectorRow.content_hash.in_([h for h, _ in batch]))))
        now = utcnow()
        fresh = [KnowledgeStageVectorRow(model=model, content_hash=h, dimensions=int(v.shape[0]), vector=pack(v),
                                         created_at=now)
                 for (h, _), v in zip(batch, vectors, strict=True) if h not in held]
        s.add_all(fresh)
        return len(fresh)


def catch_up(db: Database, campaign_id: int, embedder, *, limit: int | None = None,
             progress: bool = True) -> StagePass:
    """Embed up to `limit` (None: all) passages still without a vector from
    `embedder`'s model. Never raises for an embedder failure: it is returned
    in words and the rest stays pending for the next pass."""
    model = embedder.model_id
    with db.reading() as s:
        todo = _pending(s, campaign_id, model, limit)
        done, total = coverage(s, campaign_id, model)
    written = 0
    with tqdm(total=len(todo), desc=f"second stage ({model.split('/')[-1]})", unit="passage",
              disable=not progress or not todo, leave=False) as bar:
        for start_at in range(0, len(todo), BATCH):
            batch = todo[start_at:start_at + BATCH]
            try:
                vectors = embedder.embed([line for _, line in batch])
                if len(vectors) != len(batch):
                    raise ValueError(f"asked for {len(batch)} vectors, got {len(vectors)}")
            except Exception as exc:  # any embedder failure is reported, never raised
                return StagePass(model, written, total - done - written, f"{type(exc).__name__}: {exc}")
            written += store_vectors(db, model, batch, vectors)
            bar.update(len(batch))
    with db.reading() as s:
        done, total = coverage(s, campaign_id, model)
    return StagePass(model, written, total - done)


def vectors_for(session, model: str, hashes) -> dict[str, np.ndarray]:
    """{content hash: unit vector} of those hashes that have one."""
    wanted = list(dict.fromkeys(hashes))
    out: dict[str, np.ndarray] = {}
    for at in range(0, len(wanted), 500):
        rows = session.execute(select(KnowledgeStageVectorRow.content_hash, KnowledgeStageVectorRow.vector).where(
            KnowledgeStageVectorRow.model == model, KnowledgeStageVectorRow.content_hash.in_(wanted[at:at + 500])))
        for digest, blob in rows:
            out[digest] = unpack(blob)
    if not out:
        return out
    keys = list(out)
    matrix = unit(np.stack([out[k] for k in keys]))
    return dict(zip(keys, matrix, strict=True))


_matrices: dict[tuple, tuple[tuple, tuple[np.ndarray, np.ndarray] | None]] = {}


def _signature(session, live_sources: tuple[int, ...], model: str) -> tuple:
    """What the library matrix depends on: the live sources, their passages
    (count and newest id) and the newest vector of the model. Two indexed
    aggregates, ~1 ms for 4,000 passages."""
    n, newest = session.execute(select(func.count(), func.max(KnowledgePassageRow.id)).where(
        KnowledgePassageRow.source_id.in_(live_sources))).one()
    vec = session.scalar(select(func.max(KnowledgeStageVectorRow.id)).where(KnowledgeStageVectorRow.model == model))
    return live_sources, int(n or 0), int(newest or 0), int(vec or 0)


def library_matrix(session, db: Database, campaign_id: int, model: str, live_sources
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(passage ids, unit vectors) of every live passage of the campaign, or
    None while some passage has no vector of `model` yet: the second
    model's own candidate path scans the whole library (4,000 x 768 floats
    score in about a millisecond), but only a complete one. Kept in memory
    per file, campaign and model until the library or the vectors change."""
    live_sources = tuple(sorted(int(i) for i in live_sources))
    key = _key(db, campaign_id, model)
    signature = _signature(session, live_sources, model)
    held = _matrices.get(key)
    if held is not None and held[0] == signature:
        return held[1]
    done, total = coverage(session, campaign_id, model)
    value = None
    if total and done >= total:
        rows = session.execute(select(KnowledgePassageRow.id, KnowledgePassageRow.content_hash).where(
            KnowledgePassageRow.source_id.in_(live_sources)).order_by(KnowledgePassageRow.id)).all()
        vectors = vectors_for(session, model, [h for _, h in rows])
        rows = [(pid, h) for pid, h in rows if h in vectors]
        if rows:
            value = (np.array([pid for pid, _ in rows], dtype=np.int64),
                     np.ascontiguousarray(np.stack([vectors[h] for _, h in rows]), dtype=np.float32))
    _matrices[key] = (signature, value)
    return value


def prune(db: Database) -> int:
    """Delete vectors no passage of any campaign hashes to any more (after
    sources are deleted or rechunked)."""
    with db.writing() as s:
        used = select(KnowledgePassageRow.content_hash)
        return s.execute(delete(KnowledgeStageVectorRow).where(
            KnowledgeStageVectorRow.content_hash.not_in(used))).rowcount or 0


# ---------------------------------------------------------------- background
def _key(db: Database, campaign_id: int, model: str) -> tuple:
    return str(db.path), campaign_id, model


def start(db: Database, campaign_id: int, embedder, *, progress: bool = True) -> threading.Thread:
    """A background pass over everything pending (one per file, campaign and
    model at a time: a second call while one runs returns that one)."""
    key = _key(db, campaign_id, embedder.model_id)
    with _lock:
        alive = _threads.get(key)
        if alive is not None and alive.is_alive():
            return alive

        def run():
            try:
                while True:  # sources imported while a pass ran are pending for the next
                    outcome = catch_up(db, campaign_id, embedder, progress=progress)
                    _errors[key] = outcome.error
                    if outcome.error or not outcome.remaining or not outcome.embedded:
                        break
            except Exception as exc:  # the file was closed or removed under the pass
                _errors[key] = f"{type(exc).__name__}: {exc}"

        thread = threading.Thread(target=run, name=f"second-stage-{campaign_id}", daemon=True)
        _threads[key] = thread
        _errors.pop(key, None)
        thread.start()
        return thread


def running(db: Database, campaign_id: int, model: str) -> bool:
    thread = _threads.get(_key(db, campaign_id, model))
    return thread is not None and thread.is_alive()


def wait(db: Database, campaign_id: int, model: str, timeout: float | None = None) -> str:
    """Wait for a background pass to end; the error it stopped on, or ""."""
    thread = _threads.get(_key(db, campaign_id, model))
    if thread is not None:
        thread.join(timeout)
    return _errors.get(_key(db, campaign_id, model), "")


def last_error(db: Database, campaign_id: int, model: str) -> str:
    return _errors.get(_key(db, campaign_id, model), "")
