"""Stored vectors and the one cache that serves every kind (memories now;
passages when knowledge moves onto it).

Vectors are stored as little-endian float32 bytes. In memory they are kept
*unit-normalised*, so a cosine is one dot product, and compared with einsum:
a matrix-vector `@` goes to multi-threaded OpenBLAS, whose sleeping threads
took 10-14 ms to wake on a loaded 2-core machine, against 0.25 ms for einsum
on 4,000 x 384 (measured for knowledge retrieval).

The cache is keyed `(database, campaign, kind, model)`; an entry maps row ids
to unit vectors. Callers pass the ids they want and a loader for the ones not
held, so a turn reads only new blobs; a writer that changes a vector drops its
id (or the whole kind) with `drop`.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["CACHE", "CACHED_ENTRIES", "VectorCache", "cosines", "pack", "unit", "unpack"]

# A notebook rarely has more than a few campaigns open, each with a memory
# bank and a library: 16 entries of 4,000 x 768 float32 are ~200 MB at worst.
CACHED_ENTRIES = 16


def pack(vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def unit(matrix) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero), so a dot product is a cosine."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def cosines(matrix_unit: np.ndarray, query) -> np.ndarray:
    """Cosine of every row of a unit matrix against `query` (any length)."""
    if matrix_unit.size == 0:
        return np.zeros(0, dtype=np.float32)
    return np.einsum("ij,j->i", matrix_unit, unit(query)[0])


class VectorCache:
    """{(database, campaign, kind, model): {row id: unit vector}}, least recently used out."""

    def __init__(self, size: int = CACHED_ENTRIES):
        self.size = size
        self._data: OrderedDict[tuple, dict[int, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, wanted: Iterable[int], load: Callable[[list[int]], dict[int, bytes]]
            ) -> dict[int, np.ndarray]:
        """Unit vectors for `wanted`; `load(missing ids) -> {id: blob}` reads the rest.
        Ids not wanted any more leave the entry, so it never outgrows what is in play."""
        wanted = list(wanted)
        keep = set(wanted)
        with self._lock:
            entry = {i: v for i, v in self._data.pop(key, {}).items() if i in keep}
            self._data[key] = entry
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        missing = [i for i in wanted if i not in entry]
        if missing:
            found = {i: blob for i, blob in load(missing).items() if blob}
            if found:
                ids = list(found)
                for i, row in zip(ids, unit(np.stack([unpack(found[i]) for i in ids])), strict=True):
                    entry[i] = row
        return entry

    def drop(self, key_prefix: tuple, row_id: int | None = None) -> None:
        with self._lock:
            for key in [k for k in self._data if k[: len(key_prefix)] == key_prefix]:
                if row_id is None:
                    del self._data[key]
                else:
                    self._data[key].pop(row_id, None)


CACHE = VectorCache()
