"""Passage vectors: how they are stored, read back and scored.

Stored as little-endian float32 bytes (4 bytes per dimension) beside the model
id that made them. Reading every vector is the largest read a turn makes, and
the library rarely changes between turns, so the unit-normalised matrix of a
campaign's vectors is cached per (open database, campaign, model).

The cache is checked on every read against a two-number signature: how many
vector rows the campaign has for the model, and the newest row id. That is
exact because vector rows are only ever inserted or deleted, never updated,
and ids are AUTOINCREMENT (never reused): any insertion raises the newest id
above everything held, and without one a changed set can only be smaller.
So a change by this process or another always shows, and only the new rows
are read. Which sources are enabled is applied afterwards, per turn.
"""
from __future__ import annotations

import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
from sqlalchemy.orm import Session

from .rawsql import rows as raw_rows

__all__ = [
    "CACHE_CAMPAIGNS", "Matrix", "cache_key", "catalogue_sql", "cosines", "load_matrix", "pack", "signature_sql",
    "unit", "unpack",
]

# A notebook rarely has more than a few campaigns open; 8 matrices of
# 4,000 x 768 float32 are ~100 MB at worst.
CACHE_CAMPAIGNS = 8
_READ_BATCH = 500


def pack(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def unit(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero) so a dot product is a cosine."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def cosines(matrix_unit: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Raw cosine of every row against `query`. Raw on purpose: admission
    compares it with a measured absolute floor.

    einsum, not `@`: a matrix-vector product goes to multi-threaded OpenBLAS,
    whose sleeping threads took 10-14 ms to wake on a loaded 2-core machine
    (measured); einsum stays on the calling thread at 0.25 ms for 4,000 x 384.
    """
    return np.einsum("ij,j->i", matrix_unit, unit(query)[0])


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


class Matrix:
    """Passage ids, their sources and their unit vectors, row for row."""

    def __init__(self, passage_ids: np.ndarray, source_ids: np.ndarray, embedding_ids: tuple[int, ...],
                 vectors: np.ndarray, signature: tuple = ()):
        self.passage_ids = passage_ids
        self.source_ids = source_ids
        self.embedding_ids = embedding_ids
        self.vectors = vectors
        self.signature = signature
        self._rows: dict[int, int] | None = None
        self._views: dict[tuple, tuple[Matrix, bool]] = {}

    def __len__(self) -> int:
        return len(self.passage_ids)

    def vector_of(self, passage_id: int) -> np.ndarray | None:
        if self._rows is None:  # built once per cached matrix, not per turn
            self._rows = {int(pid): i for i, pid in enumerate(self.passage_ids)}
        row = self._rows.get(int(passage_id))
        return None if row is None else self.vectors[row]

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


_cache: OrderedDict[tuple, Matrix] = OrderedDict()
_lock = threading.Lock()
_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cache_key(db, campaign_id: int, model: str) -> tuple:
    """Per open Database object, not per path: a file deleted and made again
    at the same path starts its ids from 1, and must not meet old vectors."""
    with _lock:
        token = _tokens.setdefault(db, uuid.uuid4().hex)
    return token, campaign_id, model


def _read(session: Session, embedding_ids: Sequence[int]) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for start in range(0, len(embedding_ids), _READ_BATCH):
        ids = ", ".join(str(int(i)) for i in embedding_ids[start:start + _READ_BATCH])
        for eid, blob in raw_rows(session, f"SELECT id, vector FROM knowledge_embeddings WHERE id IN ({ids})"):
            out[int(eid)] = unpack(blob)
    return out


def load_matrix(session: Session, key: tuple, campaign_id: int, model: str) -> Matrix:
    """All of the campaign's vectors for `model`, from the cache when its
    signature still matches; otherwise re-read, reusing the vectors held."""
    params = {"campaign": campaign_id, "model": model}
    signature = tuple(raw_rows(session, signature_sql(), params)[0])
    with _lock:
        held = _cache.get(key)
        if held is not None and held.signature == signature:
            _cache.move_to_end(key)
            return held
    rows = raw_rows(session, catalogue_sql(), params)
    known = {} if held is None else {eid: held.vectors[i] for i, eid in enumerate(held.embedding_ids)}
    missing = [r[1] for r in rows if r[1] not in known]
    fresh = {eid: unit(v)[0] for eid, v in _read(session, missing).items()} if missing else {}
    widths = {v.shape[0] for v in (*known.values(), *fresh.values())}
    if len(widths) > 1:  # one model, one width; anything else is a corrupt row
        raise ValueError(f"Stored vectors for {model} have mixed widths {sorted(widths)}; reindex the library.")
    vectors = np.zeros((len(rows), widths.pop() if widths else 0), dtype=np.float32)
    for i, (_, eid, _) in enumerate(rows):
        vectors[i] = known[eid] if eid in known else fresh[eid]
    matrix = Matrix(np.array([r[0] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=np.int64),
                    tuple(r[1] for r in rows), vectors, signature)
    with _lock:
        _cache[key] = matrix
        _cache.move_to_end(key)
        while len(_cache) > CACHE_CAMPAIGNS:
            _cache.popitem(last=False)
    return matrix
