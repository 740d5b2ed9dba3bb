"""Which nodes lie on the path being played. Decided here, for everyone.

A position is `(branch, depth)`. Its path is the branch's own nodes down to
`depth`, then its parent's nodes down to the fork, and so on to the root. Any
query that asks "is this on the story being read?" filters with
`Path.clause()`, so the rule lives in one place.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, false, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from ..errors import BrokenStory
from ..store import BranchRow, NodeRow

__all__ = ["DEEPEST", "Path", "Segment", "branch_table", "path_to"]

# "As deep as the branch goes": used to look ahead of the head for Redo.
DEEPEST = 2**31 - 1


@dataclass(frozen=True)
class Segment:
    branch_id: int
    first: int
    last: int


@dataclass(frozen=True)
class Path:
    """The segments of one lineage, deepest branch first."""

    segments: tuple[Segment, ...]
    depth: int

    def clause(self, branch_col=NodeRow.branch_id, depth_col=NodeRow.depth, *,
               after: int | None = None, upto: int | None = None) -> ColumnElement[bool]:
        """On this path, and deeper than `after` / no deeper than `upto` when given.

        The bounds are folded into each segment's range rather than added as
        another `depth > ?` term: SQLite then used the segment's own lower
        bound on the (branch, depth) index and walked the whole branch to find
        seven nodes past the memory anchor (1 ms at 10,000 turns, per query)."""
        low = -1 if after is None else after
        high = DEEPEST if upto is None else upto
        kept = [(s.branch_id, max(s.first, low + 1), min(s.last, high)) for s in self.segments]
        kept = [(b, first, last) for b, first, last in kept if first <= last]
        if not kept:
            return false()
        return or_(*(and_(branch_col == b, depth_col.between(first, last)) for b, first, last in kept))

    def contains(self, branch_id: int | None, depth: int | None) -> bool:
        if branch_id is None or depth is None:
            return False
        return any(
            s.branch_id == branch_id and s.first <= depth <= s.last for s in self.segments
        )

    def branch_at(self, depth: int) -> int | None:
        """The branch that owns the node at `depth` on this path."""
        for s in self.segments:
            if s.first <= depth <= s.last:
                return s.branch_id
        return None

    def nodes(self, session: Session) -> list[NodeRow]:
        """The path's nodes, oldest first."""
        return list(session.scalars(select(NodeRow).where(self.clause()).order_by(NodeRow.depth)))


def branch_table(session: Session, campaign_id: int) -> dict[int, tuple[int | None, int]]:
    """{branch id: (parent id, fork depth)} for one campaign, in one query."""
    rows = session.execute(
        select(BranchRow.id, BranchRow.parent_id, BranchRow.fork_depth).where(
            BranchRow.campaign_id == campaign_id
        )
    )
    return {bid: (parent, fork) for bid, parent, fork in rows}


def path_to(
    branches: dict[int, tuple[int | None, int]], branch_id: int | None, depth: int
) -> Path:
    """The segments from `branch_id` at `depth` up to the root.

    A lineage visits each branch at most once, so the walk is bounded by the
    number of branches: a table in which a branch is its own ancestor (a
    crafted file or database; a sound one never holds one) is refused,
    naming the branch, where it once walked for ever at full CPU."""
    segments: list[Segment] = []
    seen: set[int] = set()
    current, last = branch_id, depth
    while current is not None and last >= 0:
        if current in seen:
            raise BrokenStory(f"Branch {current} is its own ancestor: following its parents leads back to it, so "
                              "no line of the story can be read through it. The campaign's file was changed outside "
                              "the workbench: open a backup (wb.backups()) or import the campaign from a bundle.",
                              branch=current)
        seen.add(current)
        if current not in branches:
            raise BrokenStory(f"The story reaches branch {current}, which the campaign does not have, so the line "
                              "through it cannot be read. The campaign's file was changed outside the workbench: open "
                              "a backup (wb.backups()) or import the campaign from a bundle.", branch=current)
        parent, fork = branches[current]
        first = fork + 1
        if last >= first:
            segments.append(Segment(current, first, last))
        last = min(last, fork)
        current = parent
    return Path(tuple(segments), depth)
