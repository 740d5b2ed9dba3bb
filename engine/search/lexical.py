"""The lexical path: query terms, stop words, stemming, and SQLite FTS5 over the passages.

Lexical search is a production path, not a fallback: it is what finds proper
nouns and invented words (Westhaven, broken-circle, the Silver Key), which
embeddings trained on ordinary English handle worst, and it works with no
embedder at all. The SQL is built by pure functions (`search_sql`,
`evidence_sql`) so it can be read and tested apart from the thin runners.

Scope is enforced by joining the index to passages and sources, never by a
copy of the campaign or the enabled flag inside the index, so it cannot drift
from the rows everything else reads.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from sqlalchemy import text
from sqlalchemy.orm import Session

from ..store.knowledge_tables import FTS_TABLE
from .rawsql import rows as raw_rows
from .stopwords import STOP_WORDS

__all__ = [
    "MIN_TERM_LENGTH",
    "evidence",
    "evidence_sql",
    "in_heading",
    "index_line",
    "match_expression",
    "postings",
    "quote",
    "search",
    "search_sql",
    "stems",
    "terms",
]

MIN_TERM_LENGTH = 2

_SPLIT = re.compile(r"[^\w'\-]+")
_HAS_ALNUM = re.compile(r"[^\W_]")
# How unicode61 splits text into tokens: runs of letters and digits.
_TOKEN = re.compile(r"[^\W_]+")


def index_line(heading: str, text: str) -> str:
    """Heading trail, newline, body: the one string that is indexed, embedded
    and calibrated. Headings are often the only place a name appears ("The Old
    Abbey" as a heading over prose that says "the abbey")."""
    return f"{heading}\n{text}" if heading else text


@lru_cache(maxsize=1)
def _porter():
    """The Porter stemmer the index's 'porter' tokenizer applies, so a word
    and a heading are compared the way the index compares them."""
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _porter().stemWord(word)


@lru_cache(maxsize=65536)
def _stems(text: str) -> frozenset[str]:
    # Word by word through a cache of its own: a turn meets candidate
    # headings it has not seen, made of words it has ("Chapter", "Spells", a
    # name). Over the first 20 turns of a fresh process, 4,000 passages,
    # stemming new headings whole in the pure-Python stemmer was a third of
    # the turn under cProfile (2.3 of 6.3 s; 0.28 s word by word). Timed
    # without the profiler after a few turns' warm-up, the two were equal (190
    # against 194 ms a prepared second-stage turn, alternating rounds): the
    # gain is on turns that meet many new headings.
    return frozenset(_stem(word) for word in _TOKEN.findall(text.lower()))


def stems(words: Sequence[str]) -> list[str]:
    """Each word as the index's Porter stemmer stems it (for research code
    that compares words the way the index does)."""
    return [_stem(w) for w in words]


def in_heading(heading: str, words: Sequence[str], among: Iterable[int] | None = None) -> frozenset[int]:
    """Indexes of the `words` (only those `among`, if given) a heading trail
    names: every token of the word, stemmed as the index stems it, is in it."""
    if not heading:
        return frozenset()
    named = _stems(heading)
    indexes = range(len(words)) if among is None else among
    return frozenset(i for i in indexes if (s := _stems(words[i])) and s <= named)


def terms(query_text: str) -> list[str]:
    """Distinct meaningful words of `query_text`, lower-cased, first-seen order.

    Order is kept because callers put the most important text first, and a
    query that is the same every time is reproducible.
    """
    seen: dict[str, None] = {}
    for raw in _SPLIT.split(query_text or ""):
        word = raw.strip("'-").lower()
        if len(word) < MIN_TERM_LENGTH or word in STOP_WORDS or word in seen:
            continue
        if _HAS_ALNUM.search(word):  # "__" or "'-'" would be an empty phrase
            seen[word] = None
    return list(seen)


def quote(word: str) -> str:
    """One word as an FTS5 string: its syntax (NEAR(, *, ^, quotes) is inert."""
    return '"' + word.replace('"', '""') + '"'


def match_expression(words: Sequence[str]) -> str:
    """Any of the words: the query is a bag of scene terms, not a phrase."""
    return " OR ".join(quote(w) for w in words)


_SCOPE = """
    JOIN knowledge_passages AS p ON p.id = {fts}.rowid
    JOIN knowledge_sources AS s ON s.id = p.source_id
    WHERE {fts} MATCH {param}
      AND p.campaign_id = :campaign AND s.enabled = 1 AND s.index_state = 'ready'"""


def search_sql() -> str:
    """Best passages for a MATCH expression, best first, capped in SQL.

    bm25() is lower-is-better and negative; it is negated here, once, so every
    score after this boundary is bigger-is-better.
    """
    scope = _SCOPE.format(fts=FTS_TABLE, param=":query")
    return (
        f"SELECT p.id AS passage_id, -bm25({FTS_TABLE}) AS score FROM {FTS_TABLE}{scope}\n"
        f"    ORDER BY bm25({FTS_TABLE}) LIMIT :limit"
    )


def evidence_sql(n_terms: int) -> str:
    """Which passages contain each query term, in one statement.

    bm25 is opaque and FTS5 has no matchinfo(), so each term is asked of the
    index separately: that reuses the index's own stemmer ("gates" finds
    "gate") instead of a second one in Python. The terms' posting lists are
    read whole and intersected with the candidates by the caller: restricting
    each MATCH with `rowid IN (...)` made SQLite re-run the MATCH once per
    candidate, 8 ms against 1.3 ms for whole lists at 4,000 passages
    (measured, natural word frequencies).
    """
    return "\nUNION ALL\n".join(
        f"SELECT {i} AS term, rowid AS passage_id FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :w{i}"
        for i in range(n_terms)
    )


def search(session: Session, campaign_id: int, words: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """(passage id, bm25 score) of the best `limit` matches for any of `words`."""
    if not words:
        return []
    rows = session.execute(
        text(search_sql()), {"query": match_expression(words), "campaign": campaign_id, "limit": limit}
    )
    return [(int(pid), float(score)) for pid, score in rows]


def postings(session: Session, words: Sequence[str]) -> list[set[int]]:
    """For each of `words`, the ids of every indexed passage containing it
    (any campaign: the caller scopes them). Their sizes are the words'
    document frequencies, which is what weighs a word by its rarity."""
    out: list[set[int]] = [set() for _ in words]
    if not words:
        return out
    params = {f"w{i}": quote(w) for i, w in enumerate(words)}
    for term, pid in raw_rows(session, evidence_sql(len(words)), params):
        out[term].add(pid)
    return out


def evidence(session: Session, words: Sequence[str], passage_ids: Sequence[int],
             lists: Sequence[set[int]] | None = None) -> dict[int, frozenset[int]]:
    """{passage id: indexes into `words` of the terms it contains}; `lists`
    reuses postings already read."""
    if not words or not passage_ids:
        return {}
    lists = postings(session, words) if lists is None else lists
    found: dict[int, set[int]] = {}
    for pid in {int(i) for i in passage_ids}:
        terms_in = {i for i, ids in enumerate(lists) if pid in ids}
        if terms_in:
            found[pid] = terms_in
    return {pid: frozenset(ts) for pid, ts in found.items()}
