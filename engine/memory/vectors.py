"""Memory vectors: stored and compared through the shared `engine.vectors`.

Kept as a module so memory code says which kind of vector it caches; the
cache, the packing and the numerics (unit vectors, einsum) are shared with
knowledge passages.
"""
from __future__ import annotations

from ..vectors import CACHE, cosines, pack, unpack

__all__ = ["CACHE", "KIND", "cache_key", "cosines", "pack", "unpack"]

KIND = "memories"


def cache_key(database: str, campaign_id: int, model_id: str) -> tuple:
    return (database, campaign_id, KIND, model_id)
