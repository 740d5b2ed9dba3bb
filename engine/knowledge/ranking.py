"""Ordering the admitted passages, and setting aside near-repeats.

Scores are normalised among the survivors only, and only to order them:
admission already happened on absolute numbers. bm25 has no fixed range and a
cosine's zero is not "unrelated", so neither raw number can be added to the
other; each is divided by its best survivor's value.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .classes import CLASS_WEIGHTS
from .records import Retrieved

__all__ = ["AGREEMENT", "REDUNDANT_SIMILARITY", "normalise", "rank", "relevance", "suppress"]

# A bonus for being found by both paths, small enough that a passage found by
# one path strongly still beats one found by both weakly: the paths answer
# different questions, and one answer is not worse for being alone.
AGREEMENT = 0.15
# Inherited from the memory bank, measured on nomic-embed-text: redundant
# pairs scored 0.938-0.996, distinct ones 0.349-0.906. Word overlap was ruled
# out ("Mara promised Aldric" / "Aldric promised Mara"). An identical passage
# scores 1.0 under any model; near-copies are where the number matters.
REDUNDANT_SIMILARITY = 0.93


def relevance(lexical: float, semantic: float) -> float:
    return max(lexical, semantic) + AGREEMENT * min(lexical, semantic)


def normalise(items: Sequence[Retrieved]) -> list[Retrieved]:
    """Fill in lexical, semantic and score from the raw numbers."""
    lex_top = max((r.bm25 for r in items if r.bm25 is not None and r.bm25 > 0), default=0.0)
    sem_top = max((r.cosine for r in items if r.cosine is not None and r.cosine > 0), default=0.0)
    out = []
    for r in items:
        lex = r.bm25 / lex_top if r.admitted_by in ("lexical", "both") and lex_top else 0.0
        sem = r.cosine / sem_top if r.admitted_by in ("semantic", "both") and sem_top else 0.0
        lex, sem = max(lex, 0.0), max(sem, 0.0)
        weight = CLASS_WEIGHTS.get(r.classification, 1.0)
        out.append(r.with_(lexical=lex, semantic=sem, score=relevance(lex, sem) * weight))
    return out


def rank(items: Sequence[Retrieved]) -> list[Retrieved]:
    """Always-in-force first, in source order (they are standing rules, not
    search results); then by score, passage id breaking ties so the order is
    the same on every run."""
    return sorted(items, key=lambda r: (0, r.source_id, r.number, 0.0, 0) if r.always
                  else (1, 0, 0, -r.score, r.passage_id))


def suppress(ranked: Sequence[Retrieved], vectors: Mapping[int, np.ndarray]) -> tuple[list[Retrieved], list[Retrieved]]:
    """Drop near-repeats of a better passage of the same class, before the
    budget cut (suppressing after it cannot give the slot back: four
    near-identical memories once crowded out the one that mattered).

    Never across classes: Canon and Reference saying the same thing are two
    different claims of authority. With vectors, a repeat is a cosine of
    REDUNDANT_SIMILARITY or more to a kept passage; without, only the same text.
    `vectors` holds unit vectors.
    """
    kept: list[Retrieved] = []
    dropped: list[Retrieved] = []
    for r in ranked:
        twin = _twin(r, kept, vectors)
        if twin is None:
            kept.append(r)
        else:
            dropped.append(r.with_(duplicate_of=twin.passage_id))
    return kept, dropped


def _twin(r: Retrieved, kept: Sequence[Retrieved], vectors: Mapping[int, np.ndarray]) -> Retrieved | None:
    mine = vectors.get(r.passage_id)
    for k in kept:
        if k.classification != r.classification:
            continue
        if k.text == r.text:  # passage text is stored stripped and normalised
            return k
        theirs = vectors.get(k.passage_id)
        if mine is not None and theirs is not None and float(mine @ theirs) >= REDUNDANT_SIMILARITY:
            return k
    return None
