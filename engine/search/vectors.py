"""Passage vectors: how they are stored, read back and scored.

Stored as little-endian float32 bytes (4 bytes per dimension) beside the model
id that made them. Reading every vector is the largest read a turn makes, and
the library rarely changes between turns, so the unit-normalised matrix of a
campaign's vectors is cached per (open database, campaign, model), in the one
cache of `engine.vectors` that memories share (one bound, one lock, one
keying rule, one set of numerics: `pack`, `unpack`, `unit` and `cosines` are
re-exported from there).

The cache is checked on every read against a two-number signature: how many
vector rows the campaign has for the model, and the newest row id. That is
exact because vector rows are only ever inserted or deleted, never updated,
and ids are AUTOINCREMENT (never reused): any insertion raises the newest id
above everything held, and without one a changed set can only be smaller.
So a change by this process or another always shows, and only the new rows
are read. Which sources are enabled is applied afterwards, per turn.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy.orm import Session

from ..vectors import CACHE, Held, cosines, pack, refreshed, unit, unpack
from .rawsql import rows as raw_rows

__all__ = [
    "KIND", "Matrix", "cache_key", "catalogue_sql", "cosines", "load_matrix", "pack", "signature_sql", "unit",
    "unpack",
]

KIND = "passages"
_READ_BATCH = 500


def signature_sql() -> str:
    """Count and newest id of a campaign's vectors for one model: equal
    signatures mean the same set of vector rows (see the module docstring)."""
    return ("SELECT count(*), coalesce(max(id), 0) FROM knowledge_embeddings "
            "WHERE campaign_id = :campaign AND model = :model")


def catalogue_sql() -> str:
    """Which passages (of which source) have a vector from `:model`: ids only,
    read from the covering index alone, in its own order (no sort)."""
    return ("SELECT passage_id, id, source_id FROM knowledge_embeddings "
            "WHERE campaign_id = :campaign AND model = :model ORDER BY source_id, passage_id")


class Matrix(Held):
    """Passage ids, their sources and their unit vectors, row for row; the
    cache's row ids are the embedding rows' ids."""

    def __init__(self, passage_ids: np.ndarray, source_ids: np.ndarray, embedding_ids: Sequence[int],
                 vectors: np.ndarray, signature: tuple = ()):
        super().__init__(embedding_ids, vectors, signature)
        self.passage_ids = passage_ids
        self.source_ids = source_ids
        self._passage_rows: dict[int, int] | None = None
        self._views: dict[tuple, tuple[Matrix, bool]] = {}

    @property
    def embedding_ids(self) -> tuple[int, ...]:
        return self.ids

    def vector_of(self, passage_id: int) -> np.ndarray | None:
        if self._passage_rows is None:  # built once per cached matrix, not per turn
            self._passage_rows = {int(pid): i for i, pid in enumerate(self.passage_ids)}
        row = self._passage_rows.get(int(passage_id))
        return None if row is None else self.vectors[row]

    def without(self, row_id: int) -> None:
        """Passage rows are never rewritten in place (see the module docstring);
        a drop forgets the whole matrix."""
        return None

    def live(self, source_ids: Sequence[int], limit: int) -> tuple[Matrix, bool]:
        """The rows of these sources, at most `limit` of them, and whether
        some were left out. Remembered per source set: enabling and
        disabling sources does not re-read vectors."""
        key = (tuple(sorted(source_ids)), limit)
        if key not in self._views:
            rows = np.flatnonzero(np.isin(self.source_ids, key[0]))
            truncated = len(rows) > limit
            if len(rows) == len(self) and not truncated:
                self._views[key] = (self, False)
            else:
                rows = rows[:limit]
                view = Matrix(self.passage_ids[rows], self.source_ids[rows],
                              tuple(self.embedding_ids[i] for i in rows), self.vectors[rows], self.signature)
                self._views[key] = (view, truncated)
        return self._views[key]


def cache_key(db, campaign_id: int, model: str) -> tuple:
    """Per open Database object, not per path: a file deleted and made again
    at the same path starts its ids from 1, and must not meet old vectors."""
    return CACHE.key(db, campaign_id, KIND, model)


def _read(session: Session, embedding_ids: Sequence[int]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for start in range(0, len(embedding_ids), _READ_BATCH):
        ids = ", ".join(str(int(i)) for i in embedding_ids[start:start + _READ_BATCH])
        for eid, blob in raw_rows(session, f"SELECT id, vector FROM knowledge_embeddings WHERE id IN ({ids})"):
            out[int(eid)] = blob
    return out


def load_matrix(session: Session, key: tuple, campaign_id: int, model: str) -> Matrix:
    """All of the campaign's vectors for `model`, from the cache when its
    signature still matches; otherwise re-read, reusing the vectors held."""
    params = {"campaign": campaign_id, "model": model}
    signature = tuple(raw_rows(session, signature_sql(), params)[0])

    def build(held: Held | None) -> Matrix:
        rows = raw_rows(session, catalogue_sql(), params)
        ids, vectors = refreshed(held if isinstance(held, Matrix) else None, [r[1] for r in rows],
                                 lambda missing: _read(session, missing), model, "reindex the library")
        if len(ids) < len(rows):  # a row without a blob: not comparable, so not held
            have = set(ids)
            rows = [r for r in rows if r[1] in have]
        return Matrix(np.array([r[0] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64),
                      ids, vectors, signature)

    return CACHE.entry(key, signature, build)
