"""Whether a memory states what happened or what someone inferred.

The application decides, not the model. Erring cautious is cheap (a hedged
memory labelled heuristic is still retrieved, marked [inferred]); erring the
other way turns a guess into canon.
"""
from __future__ import annotations

__all__ = ["classify_authority", "ACCEPTED", "HEURISTIC", "HEDGES"]

ACCEPTED = "accepted_story"
HEURISTIC = "heuristic"

HEDGES = (
    "seemed", "seems", "appeared to", "appears to", "apparently", "perhaps", "maybe", "might have",
    "may have", "possibly", "presumably", "suggested that", "suggests that", "implied", "implies",
    "as if", "likely", "probably", "seemingly", "hinted", "hints that", "suspects", "suspected",
    "believes", "believed", "wondered whether", "wonders whether",
)


def classify_authority(text: str) -> str:
    lowered = (text or "").lower()
    return HEURISTIC if any(h in lowered for h in HEDGES) else ACCEPTED
