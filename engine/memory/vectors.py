"""Vectors as stored (little-endian float32 bytes) and as compared (numpy).

A per-campaign cache keeps unpacked vectors between turns, so a turn reads
only the blobs it has not seen; it holds float32 arrays (a list of Python
floats would take 8x the memory).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

__all__ = ["pack", "unpack", "cosine_to", "VectorCache", "CACHE"]

# ~600 KB per campaign at a 100-memory bank of 1,536-d vectors.
CACHED_CAMPAIGNS = 8


def pack(vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def cosine_to(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Cosine of `query` against each row of `matrix` (zero rows score 0)."""
    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    norms[norms == 0] = 1.0
    return (matrix @ query) / norms


class VectorCache:
    """{(database, campaign, model): {memory id: vector}}, least recently used out.

    Correct without invalidation because every vector change goes through
    `engine.memory.bank.set_vector`, which drops the entry, and anything that
    takes a memory out of play also takes it out of the catalogue passed in."""

    def __init__(self, size: int = CACHED_CAMPAIGNS):
        self.size = size
        self._data: OrderedDict[tuple, dict[int, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, wanted: list[int], load) -> dict[int, np.ndarray]:
        """Vectors for `wanted` ids; `load(missing_ids) -> {id: blob}` reads the rest."""
        keep = set(wanted)
        with self._lock:
            entry = self._data.pop(key, {})
            entry = {i: v for i, v in entry.items() if i in keep}
            self._data[key] = entry
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        missing = [i for i in wanted if i not in entry]
        if missing:
            for i, blob in load(missing).items():
                if blob:
                    entry[i] = unpack(blob)
        return entry

    def drop(self, key_prefix: tuple, memory_id: int | None = None) -> None:
        with self._lock:
            for key in [k for k in self._data if k[: len(key_prefix)] == key_prefix]:
                if memory_id is None:
                    del self._data[key]
                else:
                    self._data[key].pop(memory_id, None)


CACHE = VectorCache()
