"""Absolute admission: does a passage have evidence, on its own, regardless of
what else was found?

This runs before ranking, and it consults nothing but the passage and the
scene. The reference's first version had only a relative floor (a share of
the best candidate); the best candidate always clears that, so something was
admitted every turn, and a tide-tables and container-tonnage scene pulled all
five sources of a fantasy campaign into the prompt, hidden Canon included
(M7-F1). Authority never rescues a passage that has no evidence.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["LEXICAL_MIN_TERMS", "SINGLE_TERM_SHARE", "lexical_admits", "semantic_admits"]

# One shared word is not evidence: the reference saw a passage admitted into an
# orbital-mechanics scene on "before", and into a harbour scene on "Aldric",
# the protagonist, whose name is in almost every scene.
LEXICAL_MIN_TERMS = 2
# A lone matching term still counts when it is most of a short query: one word
# of three is evidence, one of nine (11%) is not. A young campaign with no
# state yet has short queries, which is where this matters.
SINGLE_TERM_SHARE = 1 / 3


def lexical_admits(matched: Collection[int] | None, words: Sequence[str], standing: Collection[str]) -> bool:
    """At least two distinct query terms, or one distinctive one.

    Distinctive means both: not a standing name (the protagonist, the cast,
    established places, which are in the query every turn because the query
    is partly built from them), and a large enough share of a short query.
    Standing names are not ignored: they count as soon as a second term
    matches beside them.
    """
    if not matched or not words:
        return False
    if len(matched) >= LEXICAL_MIN_TERMS:
        return True
    (index,) = tuple(matched)
    if not 0 <= index < len(words) or words[index] in standing:
        return False
    return 1 / len(words) >= SINGLE_TERM_SHARE


def semantic_admits(cosine: float, floor: float | None) -> bool:
    """At or above this model's measured floor. No floor, no admission."""
    return floor is not None and cosine >= floor
