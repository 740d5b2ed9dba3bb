"""The per-turn reads retrieval makes, as plain SQL on the session's connection.

A turn runs these every time, so they skip SQLAlchemy's statement building
and row processing (see `rawsql`), and none of them reads a passage row it
does not return: the campaign's sources are one tiny read, and passages are
reached by id or through the (source_id, position) index.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from .classes import CANON
from .rawsql import rows

__all__ = ["Sources", "always_ids", "has_sources", "headings", "live_passage_ids", "load_sql", "passage_rows",
           "sources"]


@dataclass(frozen=True)
class Sources:
    """What a turn needs to know about the campaign's sources."""

    enabled: int  # enabled sources: whether the knowledge rule is shown
    hidden: bool  # any enabled source is narrator-only: whether the hidden rule is shown
    live: tuple[int, ...]  # enabled and indexed: what may be retrieved
    always: tuple[int, ...]  # live Canon marked always-in-force
    protagonist: str


def has_sources(session: Session, campaign_id: int) -> bool:
    """Whether the turn needs the library at all: one indexed probe."""
    return bool(rows(session, "SELECT 1 FROM knowledge_sources WHERE campaign_id = :campaign AND enabled = 1 LIMIT 1",
                     {"campaign": campaign_id}))


def sources(session: Session, campaign_id: int) -> Sources:
    found = rows(session, """
        SELECT id, index_state = 'ready', visibility = 'hidden', always_include = 1 AND classification = :canon
        FROM knowledge_sources WHERE campaign_id = :campaign AND enabled = 1 ORDER BY id""",
                 {"campaign": campaign_id, "canon": CANON})
    protagonist = rows(session, "SELECT protagonist FROM campaigns WHERE id = :campaign", {"campaign": campaign_id})
    return Sources(
        enabled=len(found),
        hidden=any(r[2] for r in found),
        live=tuple(r[0] for r in found if r[1]),
        always=tuple(r[0] for r in found if r[1] and r[3]),
        protagonist=(protagonist[0][0] if protagonist else "") or "",
    )


def always_ids(session: Session, source_ids: Iterable[int]) -> list[int]:
    """Passages of the given (always-in-force) sources, in source order."""
    listed = ", ".join(str(int(i)) for i in source_ids)
    if not listed:
        return []
    sql = f"SELECT id FROM knowledge_passages WHERE source_id IN ({listed}) ORDER BY source_id, position"
    return [r[0] for r in rows(session, sql)]


def live_passage_ids(session: Session, source_ids: Iterable[int]) -> frozenset[int]:
    """Every passage of the given (live) sources: the library a word's rarity
    is measured in. Read from the (source_id, position) index, ~1 ms for
    3,000 passages."""
    listed = ", ".join(str(int(i)) for i in source_ids)
    if not listed:
        return frozenset()
    return frozenset(r[0] for r in rows(session, f"SELECT id FROM knowledge_passages WHERE source_id IN ({listed})"))


def headings(session: Session, campaign_id: int, ids: Iterable[int]) -> dict[int, str]:
    """{passage id: its heading trail and the heading lines the chunker wrote
    into its text} of candidates: everything a passage is filed under."""
    listed = ", ".join(str(int(i)) for i in ids)
    if not listed:
        return {}
    # Only texts holding a written heading line are read (a few in ten).
    sql = (f"SELECT id, heading, CASE WHEN substr(text, 1, 3) = '## ' OR instr(text, char(10) || '## ') > 0 "
           f"THEN text ELSE '' END FROM knowledge_passages WHERE id IN ({listed}) AND campaign_id = :campaign")
    return {r[0]: "\n".join([r[1] or "", *(line for line in r[2].split("\n") if line.startswith("## "))])
            if r[2] else r[1] or "" for r in rows(session, sql, {"campaign": campaign_id})}


def load_sql(ids: Iterable[int]) -> str:
    """The admitted passages with their sources, scope re-applied (the ids
    came from an index). Ids are the application's own integers."""
    listed = ", ".join(str(int(i)) for i in ids) or "NULL"
    return f"""
        SELECT p.id, p.source_id, p.position, p.heading, p.text, p.token_count, p.content_hash,
               s.title, s.original_filename, s.classification, s.visibility
        FROM knowledge_passages AS p JOIN knowledge_sources AS s ON s.id = p.source_id
        WHERE p.id IN ({listed}) AND p.campaign_id = :campaign AND s.enabled = 1 AND s.index_state = 'ready'"""


def passage_rows(session: Session, campaign_id: int, ids: Iterable[int]) -> list[tuple]:
    return rows(session, load_sql(sorted(ids)), {"campaign": campaign_id})
