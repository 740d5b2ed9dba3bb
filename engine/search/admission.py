"""Absolute admission: does a passage have evidence of being about the scene?

Each path is judged on its own absolute scale, before any ranking: a passage
is never admitted for being the best of a bad lot.

Lexical evidence is weighed by rarity in this campaign's library. Counting
shared words admitted the rules reference's Initiative passage into "She
orders a latte at the cafe and checks her phone" on "orders" and "checks"
(measured on the retrieval evaluation's first version: 32 of 40 everyday
scenes admitted something). A word
found in most passages of a library ("check", "roll", "save" in a rules
reference) tells nothing about which passage a scene is about; a word found in
three tells a lot. So each query word weighs its inverse document frequency
(BM25's idf) over the live passages; a word in more than `common_share` of them
weighs nothing, like a stop word for this library; a word the passage's
heading names weighs `heading_weight` times as much, because a heading says what
a passage is about where body text only mentions things. Standing names (the
protagonist, the cast) count only beside other evidence.

How much evidence admits depends on the query: a passage must carry
`query_share` of the query's own weight (a word the library never uses weighs
the most, so "the cashier scans the groceries and asks if I need a bag" asks
for far more than its one shared word, "bag"), at least `lexical_min_evidence`
and at most `lexical_max_required`, so a long scene (a turn's query is up to
600 tokens of story) needs strong evidence, never the impossible; past
`cap_terms` weighed words that cap grows with the words, because chance
overlap does.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from .tuning import DEFAULT, Tuning

__all__ = ["Weights", "idf", "lexical_admits", "lexical_evidence", "semantic_admits", "weigh"]

# Every number here is a field of `Tuning` (query_share, lexical_min_evidence,
# lexical_max_required, cap_terms, common_share, named_common_share,
# heading_weight, min_library), with the measurement that chose it.


def idf(df: int, n: int) -> float:
    """BM25's inverse document frequency: never negative, ln(1 + ...)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if n > 0 else 0.0


@dataclass(frozen=True)
class Weights:
    """What each query word is worth in this library, and which words are
    standing names (evidence only beside something else)."""

    values: tuple[float, ...]
    standing: frozenset[int]
    query: float = 0.0  # the query's own weight: its words, unknown ones at full weight
    named: tuple[float, ...] = ()  # what each word weighs when a heading names it
    tuning: Tuning = field(default=DEFAULT, repr=False, compare=False)

    def of(self, index: int, in_heading: bool = False) -> float:
        table = self.named if in_heading and self.named else self.values
        return table[index] if 0 <= index < len(table) else 0.0

    @property
    def weighed(self) -> int:
        """Words that carry weight, standing names aside."""
        return sum(1 for i, v in enumerate(self.values) if v > 0 and i not in self.standing)

    @property
    def required(self) -> float:
        """Evidence a passage needs for this query (see module doc)."""
        t = self.tuning
        cap = t.lexical_max_required * max(1.0, self.weighed / max(t.cap_terms, 1))
        return max(t.lexical_min_evidence, min(cap, t.query_share * self.query))


def weigh(frequencies: Sequence[int], n: int, words: Sequence[str], standing: Collection[str],
          only: Collection[int] | None = None, tuning: Tuning = DEFAULT) -> Weights:
    """Each word's weight from its document frequency among `n` live passages;
    with `only`, the words at those indexes alone (the others weigh nothing
    and are not part of the query's weight)."""
    t = tuning
    n = max(n, t.min_library)
    keep = range(len(frequencies)) if only is None else frozenset(only)
    values = tuple(0.0 if i not in keep or df <= 0 or df / n > t.common_share else idf(df, n)
                   for i, df in enumerate(frequencies))
    # A heading that names even a common word is specific ("Bag of Holding":
    # "holding" is in 6% of the rules reference's passages).
    named = tuple(t.heading_weight * idf(df, n) if i in keep and 0 < df <= t.named_common_share * n else 0.0
                  for i, df in enumerate(frequencies))
    stand = frozenset(i for i, w in enumerate(words) if w in standing)
    counted = [i for i, df in enumerate(frequencies) if i in keep and i not in stand and df / n <= t.common_share]
    return Weights(values, stand, sum(idf(frequencies[i], n) for i in counted), named, t)


def lexical_evidence(matched: Collection[int] | None, weights: Weights,
                     in_heading: Collection[int] = ()) -> float:
    """The passage's evidence: the weights of the words it contains, those its
    heading names counted `heading_weight` times; standing names only count
    when another word does."""
    if not matched:
        return 0.0
    own = [i for i in matched if i not in weights.standing and weights.of(i, i in in_heading) > 0]
    if not own:
        return 0.0
    return sum(weights.of(i, i in in_heading) for i in matched)


def lexical_admits(evidence: float, weights: Weights) -> bool:
    return evidence > 0 and evidence >= weights.required


def semantic_admits(cosine: float, floor: float | None) -> bool:
    """At or above this model's measured floor. No floor, no admission."""
    return floor is not None and cosine >= floor
