"""Memory vectors: stored and compared through the shared `engine.vectors`.

Kept as a module so memory code says which kind of vector it caches; the
cache, its keying, the packing and the numerics (unit vectors, einsum) are
those of knowledge passages too.
"""
from __future__ import annotations

from ..vectors import CACHE, cosines, pack, unit, unpack

__all__ = ["CACHE", "KIND", "cache_key", "cosines", "pack", "unit", "unpack"]

KIND = "memories"


def cache_key(source, campaign_id: int, model_id: str) -> tuple:
    """Per open database (`source`: the session reading it, or the Database),
    not per path: a file made again at the same path restarts its memory ids."""
    return CACHE.key(source, campaign_id, KIND, model_id)
