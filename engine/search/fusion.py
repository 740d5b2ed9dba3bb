"""Candidate fusion: ordering the admitted passages, cutting the weak tail, and setting aside near-repeats.

Admission already happened on absolute numbers; this only orders survivors.
The score adds the two paths' raw evidence on one scale: the cosine, plus the
lexical evidence (rarity-weighted, see `admission`) times `evidence_scale`. Both
are absolute, so a passage found by both paths simply scores more, and a
passage that only one path found weakly is not lifted to 1.0 by being the best
of its path (the old per-path normalisation did that, and an irrelevant
top-of-its-path passage then tied the real answer). Then every retrieved
passage scoring under `relative_cut` of the best is dropped: a scene's answer is
usually one or two passages, and the tail was where precision went.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .classes import CLASS_WEIGHTS
from .results import Retrieved
from .tuning import DEFAULT, Tuning

__all__ = ["cut", "normalise", "normalise_second", "rank", "relevance", "suppress"]

# evidence_scale, relative_cut, second_evidence_scale, second_cut and
# redundant_similarity are fields of `Tuning`, each with its measurement.


def relevance(evidence: float, cosine: float, tuning: Tuning = DEFAULT) -> float:
    return tuning.evidence_scale * max(evidence, 0.0) + max(cosine, 0.0)


def normalise(items: Sequence[Retrieved], tuning: Tuning = DEFAULT) -> list[Retrieved]:
    """Fill in lexical (the evidence on the cosine's scale), semantic (the
    cosine) and score (their sum times the class weight)."""
    out = []
    for r in items:
        lex = tuning.evidence_scale * max(r.evidence or 0.0, 0.0)
        sem = max(r.cosine or 0.0, 0.0)
        weight = CLASS_WEIGHTS.get(r.classification, 1.0)
        out.append(r.with_(lexical=lex, semantic=sem, score=(lex + sem) * weight))
    return out


def normalise_second(items: Sequence[Retrieved], scale: float | None = None, tuning: Tuning = DEFAULT
                     ) -> list[Retrieved]:
    """As `normalise`, with the second stage's score in the cosine's place
    and the evidence at `scale` (default `second_evidence_scale`; 0 when the
    second stage's score already fused it in)."""
    scale = tuning.second_evidence_scale if scale is None else scale
    out = []
    for r in items:
        lex = scale * max(r.evidence or 0.0, 0.0)
        sem = max(r.second or 0.0, 0.0)
        weight = CLASS_WEIGHTS.get(r.classification, 1.0)
        out.append(r.with_(lexical=lex, semantic=sem, score=(lex + sem) * weight))
    return out


def cut(ranked: Sequence[Retrieved], *, second: bool = False, share: float | None = None,
        tuning: Tuning = DEFAULT) -> tuple[list[Retrieved], list[Retrieved]]:
    """(kept, dropped): retrieved passages whose relevance is under
    `relative_cut` of the best go; always-in-force ones are never cut. On
    relevance, not the class-weighted score: authority orders passages, it
    must not decide that a Reference passage as relevant as a Canon one is
    the weak tail."""
    share = share if share is not None else tuning.second_cut if second else tuning.relative_cut
    best = max((r.lexical + r.semantic for r in ranked if not r.always), default=0.0)
    weak = {id(r) for r in ranked if not r.always and r.lexical + r.semantic < share * best}
    return [r for r in ranked if id(r) not in weak], [r for r in ranked if id(r) in weak]


def rank(items: Sequence[Retrieved]) -> list[Retrieved]:
    """Always-in-force first, in source order (they are standing rules, not
    search results); then by score, passage id breaking ties so the order is
    the same on every run."""
    return sorted(items, key=lambda r: (0, r.source_id, r.number, 0.0, 0) if r.always
                  else (1, 0, 0, -r.score, r.passage_id))


def suppress(ranked: Sequence[Retrieved], vectors: Mapping[int, np.ndarray], tuning: Tuning = DEFAULT
             ) -> tuple[list[Retrieved], list[Retrieved]]:
    """Drop near-repeats of a better passage of the same class, before the
    budget cut (suppressing after it cannot give the slot back: four
    near-identical memories once crowded out the one that mattered).

    Never across classes: Canon and Reference saying the same thing are two
    different claims of authority. With vectors, a repeat is a cosine of
    `redundant_similarity` or more to a kept passage; without, only the same text.
    `vectors` holds unit vectors.
    """
    kept: list[Retrieved] = []
    dropped: list[Retrieved] = []
    for r in ranked:
        twin = _twin(r, kept, vectors, tuning.redundant_similarity)
        if twin is None:
            kept.append(r)
        else:
            dropped.append(r.with_(duplicate_of=twin.passage_id))
    return kept, dropped


def _twin(r: Retrieved, kept: Sequence[Retrieved], vectors: Mapping[int, np.ndarray], bar: float
          ) -> Retrieved | None:
    mine = vectors.get(r.passage_id)
    for k in kept:
        if k.classification != r.classification:
            continue
        if k.text == r.text:  # passage text is stored stripped and normalised
            return k
        theirs = vectors.get(k.passage_id)
        if mine is not None and theirs is not None and float(mine @ theirs) >= bar:
            return k
    return None
