"""The scene a turn searches with: not the reader's sentence alone.

"I open the door" retrieves nothing; the scene around it does. The query is
the standing state first (where we are, who is here, what is unresolved),
then the newest story, capped, so the words that define the scene come first
in the term list and a long story cannot turn every query into a search for
everything.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..context import tokens

__all__ = ["QUERY_STORY_TEXTS", "QUERY_TOKENS", "scene_query"]

# The newest four story texts: the same window the memory bank reads; older
# turns are the summary's job.
QUERY_STORY_TEXTS = 4
# At most this much story text (the newest of it) goes into the query.
QUERY_TOKENS = 600


def _tail(text: str, budget: int) -> str:
    """The end of `text` within `budget` tokens, cut at a word boundary."""
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the smallest start index whose tail fits
        mid = (lo + hi) // 2
        if tokens.count(" ".join(words[mid:])) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return " ".join(words[lo:])


def scene_query(story: Sequence[str], state: Iterable[str] = ()) -> str:
    """Query text from state lines and story texts (oldest first, as played).

    Only the newest QUERY_STORY_TEXTS texts are read, cut to the newest
    QUERY_TOKENS tokens; state lines come first.
    """
    kept: list[str] = []
    room = QUERY_TOKENS
    for text in reversed([t for t in story if t and t.strip()][-QUERY_STORY_TEXTS:]):
        cost = tokens.count(text)
        if cost > room:
            if room > 0:
                kept.append(_tail(text, room))
            break
        kept.append(text)
        room -= cost
    story_text = "\n\n".join(reversed([k for k in kept if k]))
    head = " ".join(s.strip() for s in state if s and s.strip())
    return "\n".join(x for x in (head, story_text) if x)
