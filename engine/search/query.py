"""The scene a turn searches with: not the reader's sentence alone.

"I open the door" retrieves nothing; the scene around it does. The query is
the standing state first (where we are, who is here, what is unresolved),
then the newest story, newest text first and capped, so the words that
define the scene come first in the term list and in what an embedder reads,
and a long story cannot turn every query into a search for everything.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..budget import tokens

__all__ = ["QUERY_PARTS", "QUERY_STORY_TEXTS", "QUERY_TOKENS", "query_parts", "scene_query"]

# The newest four story texts: the same window the memory bank reads; older
# turns are the summary's job.
QUERY_STORY_TEXTS = 4
# At most this much story text (the newest of it) goes into the query.
QUERY_TOKENS = 600


def scene_query(story: Sequence[str], state: Iterable[str] = ()) -> str:
    """Query text from state lines and story texts (oldest first, as played).

    Only the newest QUERY_STORY_TEXTS texts are read, newest first, within
    QUERY_TOKENS tokens (`tokens.newest_first` says why that order); state
    lines come first.
    """
    story_text = tokens.newest_first([t for t in story if t and t.strip()][-QUERY_STORY_TEXTS:], QUERY_TOKENS)
    head = " ".join(s.strip() for s in state if s and s.strip())
    return "\n".join(x for x in (head, story_text) if x)


# The semantic path embeds the scene paragraph by paragraph and keeps each
# passage's best cosine (see `query_parts`); at most this many, newest first.
QUERY_PARTS = 8
_PARAGRAPHS = re.compile(r"\n\s*\n")


def query_parts(query_text: str) -> list[str]:
    """The query's paragraphs, in query order (newest story first), at most
    QUERY_PARTS.

    Why parts: a mean-pooled embedding of a whole scene is the average of
    everything in it. The reader's line after three turns of other story
    scored 0.24 against the passage it named, 0.54 alone (MiniLM; the floor
    is 0.44). A paragraph is the form the floor was calibrated on (one scene
    line), so each part is judged on the same scale."""
    return [p.strip() for p in _PARAGRAPHS.split(query_text or "") if p.strip()][:QUERY_PARTS]
