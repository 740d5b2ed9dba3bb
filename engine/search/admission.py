"""Absolute admission: does a passage have evidence of being about the scene?

Each path is judged on its own absolute scale, before any ranking: a passage
is never admitted for being the best of a bad lot.

Lexical evidence is weighed by rarity in this campaign's library. Counting
shared words admitted the rules reference's Initiative passage into "She
orders a latte at the cafe and checks her phone" on "orders" and "checks"
(measured, issue 16: 32 of 40 everyday scenes admitted something). A word
found in most passages of a library ("check", "roll", "save" in a rules
reference) tells nothing about which passage a scene is about; a word found in
three tells a lot. So each query word weighs its inverse document frequency
(BM25's idf) over the live passages; a word in more than COMMON_SHARE of them
weighs nothing, like a stop word for this library; a word the passage's
heading names weighs HEADING_WEIGHT times as much, because a heading says what
a passage is about where body text only mentions things. Standing names (the
protagonist, the cast) count only beside other evidence.

How much evidence admits depends on the query: a passage must carry
QUERY_SHARE of the query's own weight (a word the library never uses weighs
the most, so "the cashier scans the groceries and asks if I need a bag" asks
for far more than its one shared word, "bag"), at least LEXICAL_MIN_EVIDENCE
and at most LEXICAL_MAX_REQUIRED, so a long scene (a turn's query is up to
600 tokens of story) needs strong evidence, never the impossible; past
CAP_TERMS weighed words that cap grows with the words, because chance
overlap does.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "CAP_TERMS",
    "COMMON_SHARE",
    "HEADING_WEIGHT",
    "LEXICAL_MAX_REQUIRED",
    "LEXICAL_MIN_EVIDENCE",
    "MIN_LIBRARY",
    "NAMED_COMMON_SHARE",
    "QUERY_SHARE",
    "Weights",
    "idf",
    "lexical_admits",
    "lexical_evidence",
    "semantic_admits",
    "weigh",
]

# A word in more than this share of the library's passages carries no
# evidence. Measured on the evaluation library (3,119 passages): "save" is in
# 26%, "check" and "roll" 10%, "holding" 6%, while words that name a rule
# ("round" 4.4%, "prone" 3.8%, "grapple" 2.1%, "initiative" 1.2%) are under 5%.
COMMON_SHARE = 0.05
# A heading naming a word up to this common still counts it ("Bag of
# Holding", 6%); "Intelligence Checks" (10%) admitted an everyday scene about
# checking the weather forecast, so "check" does not.
NAMED_COMMON_SHARE = 0.08
# A heading that names the word counts it this many times (see module doc).
HEADING_WEIGHT = 2.0
# Evidence, in idf units (ln scale): with ~3,000 passages a word in one
# passage weighs ~7.6, in 10 ~5.7, in 50 ~4.1, at the 5% cut ~3.0. Chosen on
# the retrieval evaluation (notebooks/retrieval_eval.ipynb; 72 targeted and 42
# everyday scenes over a rules reference, a novel and a setting wiki): share
# 0.6 capped at 14 left 1 of 42 everyday scenes admitting anything lexically
# or semantically (shares 0.3-0.5 let 10-18 through; caps of 16 and more cost
# targeted scenes without removing it). The floor of 9 keeps one rare word in
# a passage's body (the off-topic "orders" weighed 5.0) from being enough
# when a query is short; in a heading it is ("Fireball", 2 x 5.3).
# The floor is one word at the common cut: it changed nothing on the
# evaluation between 0 and 10, and below it a lone word would be no evidence.
QUERY_SHARE = 0.6
LEXICAL_MIN_EVIDENCE = 3.0
LEXICAL_MAX_REQUIRED = 14.0
# ... for a scene of up to this many weighed words; past it the cap grows in
# proportion. The more words a scene has, the more of them any passage shares
# by chance: after three turns of everyday story (a bus ride, an office, a
# phone call) a fixed cap of 14 let every one of 42 everyday scenes admit a
# passage on words like crowded/window/talk/loudly (evidence 20-40). Growing
# from 10 words, 1 of 42 (from 12, 4; a fixed 28 cost 3 of 72 one-line
# scenes). One-line scenes, with 5-15 weighed words, are as before.
CAP_TERMS = 10
# Rarity is measured against at least this many passages. A handful of
# passages cannot show which words are common (in a one-passage library every
# word is in 100% of it), and a small library is specific anyway.
MIN_LIBRARY = 1000


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
        cap = LEXICAL_MAX_REQUIRED * max(1.0, self.weighed / CAP_TERMS)
        return max(LEXICAL_MIN_EVIDENCE, min(cap, QUERY_SHARE * self.query))


def weigh(frequencies: Sequence[int], n: int, words: Sequence[str], standing: Collection[str],
          only: Collection[int] | None = None) -> Weights:
    """Each word's weight from its document frequency among `n` live passages;
    with `only`, the words at those indexes alone (the others weigh nothing
    and are not part of the query's weight)."""
    n = max(n, MIN_LIBRARY)
    keep = range(len(frequencies)) if only is None else frozenset(only)
    values = tuple(0.0 if i not in keep or df <= 0 or df / n > COMMON_SHARE else idf(df, n)
                   for i, df in enumerate(frequencies))
    # A heading that names even a common word is specific ("Bag of Holding":
    # "holding" is in 6% of the rules reference's passages).
    named = tuple(HEADING_WEIGHT * idf(df, n) if i in keep and 0 < df <= NAMED_COMMON_SHARE * n else 0.0
                  for i, df in enumerate(frequencies))
    stand = frozenset(i for i, w in enumerate(words) if w in standing)
    counted = [i for i, df in enumerate(frequencies) if i in keep and i not in stand and df / n <= COMMON_SHARE]
    return Weights(values, stand, sum(idf(frequencies[i], n) for i in counted), named)


def lexical_evidence(matched: Collection[int] | None, weights: Weights,
                     in_heading: Collection[int] = ()) -> float:
    """The passage's evidence: the weights of the words it contains, those its
    heading names counted HEADING_WEIGHT times; standing names only count
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
