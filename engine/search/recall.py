"""Ranking a small bank of recall units (memories, summaries) for a query.

A bank is held whole as one matrix of unit vectors (`engine.vectors.CACHE`),
so there is no candidate step: every unit is scored. The query comes in
parts, each with a weight (the reader's line at 1, the newest story at the
tuning's `story_weight`), and a unit's score is its best weighed cosine plus
the rarity-weighed share of the reader's own words it holds, times
`lexical_weight`: names and places are rare, so "Ashwater" in the line lifts
the one unit that holds it where a cosine alone is outweighed by the newest
filler. The numbers are `Tuning` fields, with the measurements that chose them.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .tuning import DEFAULT, Tuning

__all__ = ["Ranked", "choose", "rank_units", "rarity_share"]


@dataclass(frozen=True)
class Ranked:
    """Every unit's score, best first, and what each was made of."""

    order: list[int]
    score: dict[int, float] = field(default_factory=dict)
    cosine: dict[int, float] = field(default_factory=dict)
    lexical: dict[int, float] = field(default_factory=dict)


def rarity_share(words: Collection[str], texts: Mapping[int, str],
                 terms: Callable[[str], Collection[str]]) -> dict[int, float]:
    """Per unit, the share (0-1) of `words` it holds, each word weighed by its
    rarity among these units (a word every unit holds says nothing)."""
    if not words or not texts:
        return {}
    words = frozenset(words)
    # Most units hold none of a line's few words: ask before intersecting
    # rather than make an empty set for each (~1,300 units a turn at 10,000 turns).
    held = {i: found & words for i, t in texts.items() if not words.isdisjoint(found := frozenset(terms(t)))}
    df = Counter(w for found in held.values() for w in found)
    n = len(texts)
    weight = {w: math.log((n + 1) / (df[w] + 0.5)) for w in words}
    total = sum(weight.values()) or 1.0
    return {i: sum(weight[w] for w in found) / total for i, found in held.items() if found}


def rank_units(ids: Sequence[int], parts: Sequence[tuple[np.ndarray, float]],
               lexical: Mapping[int, float] | None = None, tuning: Tuning = DEFAULT) -> Ranked:
    """Score units (`ids`) from each query part's cosines (row for row with
    `ids`) and weight: a unit's best weighed cosine, plus `lexical` (from
    `rarity_share`) times the tuning's `lexical_weight`; ties keep the bank's
    order."""
    if not len(ids) or not parts:
        return Ranked([])
    best = np.max([np.asarray(c) * w for c, w in parts], axis=0)
    cosine = dict(zip(ids, np.atleast_1d(best).tolist(), strict=True))
    lexical = dict(lexical or {})
    score = {i: c + tuning.lexical_weight * lexical.get(i, 0.0) for i, c in cosine.items()}
    return Ranked(sorted(score, key=score.get, reverse=True), score, cosine, lexical)


def choose(order: Sequence[int], top_k: int, *, pinned: Collection[int] = (), group: Mapping[int, str] | None = None,
           vector_of: Callable[[int], np.ndarray] | None = None, bar: float = DEFAULT.memory_redundant
           ) -> tuple[list[int], list[dict]]:
    """(chosen, suppressed): the pinned units always (they count toward
    `top_k`), then the best of the rest in `order`, skipping a unit whose
    cosine to a kept one of the same `group` is `bar` or more."""
    pinned_ids = [i for i in order if i in pinned]
    room = max(0, top_k - len(pinned_ids))
    kept: list[int] = []
    suppressed: list[dict] = []
    group = group or {}
    for i in order:
        if i in pinned or len(kept) >= room:
            continue
        twin = next((k for k in kept if group.get(k) == group.get(i) and vector_of is not None
                     and float(vector_of(i) @ vector_of(k)) >= bar), None)
        if twin is None:
            kept.append(i)
        else:
            suppressed.append({"id": i, "duplicate_of": twin})
    return pinned_ids + kept, suppressed
