"""The three kinds of imported knowledge, and how much each is trusted.

A source has exactly one class, chosen by the reader. The class decides how
much the narrator is asked to believe a passage (framing) and a small tie-break
in ranking (weights); it never decides whether a passage is relevant.
"""
from __future__ import annotations

__all__ = [
    "CANON",
    "CLASSES",
    "CLASS_LABELS",
    "CLASS_WEIGHTS",
    "HIDDEN",
    "INSPIRATION",
    "NORMAL",
    "REFERENCE",
    "VISIBILITIES",
]

CANON = "canon"
REFERENCE = "reference"
INSPIRATION = "inspiration"
# Highest authority first.
CLASSES = (CANON, REFERENCE, INSPIRATION)
CLASS_LABELS = {CANON: "Canon", REFERENCE: "Reference", INSPIRATION: "Inspiration"}

NORMAL = "normal"
# Narrator-only: shown to the narrator, marked as something the protagonist
# does not know. Withholding it instead would leave the narrator unable to
# steer towards a secret it has never seen.
HIDDEN = "hidden"
VISIBILITIES = (NORMAL, HIDDEN)

# Multipliers on relevance, never bonuses. An additive bonus lets an
# irrelevant Canon passage outrank a relevant Reference one on authority
# alone (the reference's M7-F1 failure); a multiplier of near-zero relevance
# stays near zero. The spread is narrow on purpose: it settles near-ties and
# cannot overturn a real difference in relevance.
CLASS_WEIGHTS = {CANON: 1.00, REFERENCE: 0.85, INSPIRATION: 0.70}
