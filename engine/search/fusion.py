"""Ordering the admitted passages, cutting the weak tail, and setting aside near-repeats.

Admission already happened on absolute numbers; this only orders survivors.
The score adds the two paths' raw evidence on one scale: the cosine, plus the
lexical evidence (rarity-weighted, see `admission`) times EVIDENCE_SCALE. Both
are absolute, so a passage found by both paths simply scores more, and a
passage that only one path found weakly is not lifted to 1.0 by being the best
of its path (the old per-path normalisation did that, and an irrelevant
top-of-its-path passage then tied the real answer). Then every retrieved
passage scoring under RELATIVE_CUT of the best is dropped: a scene's answer is
usually one or two passages, and the tail was where precision went.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .classes import CLASS_WEIGHTS
from .records import Retrieved

__all__ = ["EVIDENCE_SCALE", "REDUNDANT_SIMILARITY", "RELATIVE_CUT", "SECOND_CUT", "SECOND_EVIDENCE_SCALE", "cut",
           "normalise", "normalise_second", "rank", "relevance", "suppress"]

# Lexical evidence (idf units, admitted from ~9) to the cosine's scale.
# Measured on the retrieval evaluation (3 documents, 72 targeted scenes, the
# relevant passage among each scene's two best): 0.02 put it there for 47
# scenes, 0.05 for 42, reciprocal-rank fusion for 41-42, either path alone 36-38.
EVIDENCE_SCALE = 0.02
# Retrieved passages scoring under this share of the best are dropped.
# Measured (same evaluation, MiniLM): 0.9 raised the precision of what was
# admitted at 4,096 from 45% to 52% and at 16,384 from 25% to 47%, for one
# targeted scene in 72 losing its answer; 0.8 kept 37% at 16,384.
RELATIVE_CUT = 0.9
# The same two constants when the second stage judged the turn: its score
# takes the cosine's place. Chosen on the tuning half of the retrieval
# evaluation (notebooks/retrieval_eval.ipynb, "Second-stage constants"; 54
# targeted and 41 everyday scenes, 5 candidates per path): cut 0.8 and scale
# 0.01 found 33 scenes at 4,096 (cut 0.9: 32, 0.95: 30; scale 0: 28), with no
# everyday scene admitting at the calibrated floor.
SECOND_EVIDENCE_SCALE = 0.01
SECOND_CUT = 0.8
# Inherited from the memory bank, measured on nomic-embed-text: redundant
# pairs scored 0.938-0.996, distinct ones 0.349-0.906. Word overlap was ruled
# out ("Mara promised Aldric" / "Aldric promised Mara"). An identical passage
# scores 1.0 under any model; near-copies are where the number matters.
REDUNDANT_SIMILARITY = 0.93


def relevance(evidence: float, cosine: float) -> float:
    return EVIDENCE_SCALE * max(evidence, 0.0) + max(cosine, 0.0)


def normalise(items: Sequence[Retrieved]) -> list[Retrieved]:
    """Fill in lexical (the evidence on the cosine's scale), semantic (the
    cosine) and score (their sum times the class weight)."""
    out = []
    for r in items:
        lex = EVIDENCE_SCALE * max(r.evidence or 0.0, 0.0)
        sem = max(r.cosine or 0.0, 0.0)
        weight = CLASS_WEIGHTS.get(r.classification, 1.0)
        out.append(r.with_(lexical=lex, semantic=sem, score=(lex + sem) * weight))
    return out


def normalise_second(items: Sequence[Retrieved], scale: float | None = None) -> list[Retrieved]:
    """As `normalise`, with the second stage's score in the cosine's place
    and the evidence at `scale` (default SECOND_EVIDENCE_SCALE; 0 when the
    second stage's score already fused it in)."""
    scale = SECOND_EVIDENCE_SCALE if scale is None else scale
    out = []
    for r in items:
        lex = scale * max(r.evidence or 0.0, 0.0)
        sem = max(r.second or 0.0, 0.0)
        weight = CLASS_WEIGHTS.get(r.classification, 1.0)
        out.append(r.with_(lexical=lex, semantic=sem, score=(lex + sem) * weight))
    return out


def cut(ranked: Sequence[Retrieved], *, second: bool = False, share: float | None = None
        ) -> tuple[list[Retrieved], list[Retrieved]]:
    """(kept, dropped): retrieved passages whose relevance is under
    RELATIVE_CUT of the best go; always-in-force ones are never cut. On
    relevance, not the class-weighted score: authority orders passages, it
    must not decide that a Reference passage as relevant as a Canon one is
    the weak tail."""
    share = share if share is not None else SECOND_CUT if second else RELATIVE_CUT
    best = max((r.lexical + r.semantic for r in ranked if not r.always), default=0.0)
    weak = {id(r) for r in ranked if not r.always and r.lexical + r.semantic < share * best}
    return [r for r in ranked if id(r) not in weak], [r for r in ranked if id(r) in weak]


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
