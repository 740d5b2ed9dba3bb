"""The story tree: where nodes go, takes, undo and redo, edits.

Every write that would change what an existing line says opens a branch
instead, so nothing the reader has seen is ever overwritten or deleted:

- writing at the tip appends to the head's branch;
- writing behind the tip, or where the head's branch only borrows, forks a
  branch from the head (one row);
- a retry or an edit puts a new take at the same depth on a branch of its own,
  so each take keeps its own future and Redo finds it again.

The head rests on the opening or a narration; Undo and Redo move it one turn
(an input and its narration) without deleting anything.

A revision is the one change made in place: a passage corrected where it
stands (or written on by the narrator) keeps its id, its depth and
everything after it, and the text it replaced is kept as a revision row, so
it can be brought back. Records of later turns rebuild the history they were
shown from the texts as they were then (`texts_as_of`).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ..errors import NotAllowed, NotFound
from ..store import BranchRow, CampaignRow, NodeRevisionRow, NodeRow
from ..store.models import utcnow
from .lineage import DEEPEST, Path, branch_table, path_to

__all__ = ["INPUT_KINDS", "RESTING", "StoryTree", "recorded_at", "texts_as_of"]

# Where the head may rest: the opening and the narrator's replies.
RESTING = ("start", "narrator")
# What a reader writes: an in-story action or an out-of-character direction.
INPUT_KINDS = ("player", "direction")


@dataclass(frozen=True)
class Place:
    """Where the next node goes: a branch and a depth (and a fork to make first)."""

    branch_id: int | None
    depth: int
    fork_from: int | None = None
    fork_depth: int = -1


class StoryTree:
    """One campaign's tree, read and changed inside one session."""

    def __init__(self, session: Session, campaign: CampaignRow):
        self.session = session
        self.campaign = campaign
        self.branches = branch_table(session, campaign.id)

    # ------------------------------------------------------------ reading
    def path(self, depth: int | None = None) -> Path:
        c = self.campaign
        return path_to(self.branches, c.head_branch_id, c.head_depth if depth is None else depth)

    def ahead(self) -> Path:
        """The head's branch followed to its end: what Redo can walk into."""
        return path_to(self.branches, self.campaign.head_branch_id, DEEPEST)

    def head_node(self) -> NodeRow | None:
        return self.node_at(self.campaign.head_depth)

    def node_at(self, depth: int, path: Path | None = None) -> NodeRow | None:
        if depth < 0:
            return None
        path = path or self.path()
        branch = path.branch_at(depth)
        if branch is None:
            return None
        return self.session.scalar(
            select(NodeRow).where(NodeRow.branch_id == branch, NodeRow.depth == depth)
        )

    def node(self, node_id: int) -> NodeRow:
        row = self.session.get(NodeRow, node_id)
        if row is None or row.campaign_id != self.campaign.id:
            raise NotFound(f"There is no story node {node_id} in this campaign.")
        return row

    def takes(self, node: NodeRow) -> list[NodeRow]:
        """All takes of the turn `node` belongs to, oldest first."""
        return list(
            self.session.scalars(
                select(NodeRow)
                .where(
                    NodeRow.campaign_id == self.campaign.id,
                    NodeRow.depth == node.depth,
                    NodeRow.parent_id.is_(None)
                    if node.parent_id is None
                    else NodeRow.parent_id == node.parent_id,
                )
                .order_by(NodeRow.id)
            )
        )

    def undo_target(self) -> int | None:
        """The depth Undo would move the head to, or None when it cannot."""
        head = self.head_node()
        if head is None or head.kind == "start":
            return None
        depth = self.session.scalar(
            select(func.max(NodeRow.depth)).where(
                self.path().clause(),
                NodeRow.depth < head.depth,
                NodeRow.kind.in_(RESTING),
            )
        )
        return -1 if depth is None else depth

    def redo_target(self) -> int | None:
        return self.session.scalar(
            select(func.min(NodeRow.depth)).where(
                self.ahead().clause(),
                NodeRow.depth > self.campaign.head_depth,
                NodeRow.kind.in_(RESTING),
            )
        )

    # ------------------------------------------------------------ writing
    def next_place(self) -> Place:
        """Where a node written at the head goes, forking if the head is not at a tip."""
        c = self.campaign
        depth = c.head_depth + 1
        branch = c.head_branch_id
        _, fork = self.branches[branch]
        owns = depth > fork
        occupied = owns and self.session.scalar(
            select(NodeRow.id).where(NodeRow.branch_id == branch, NodeRow.depth == depth)
        )
        if owns and not occupied:
            return Place(branch, depth)
        return Place(None, depth, fork_from=branch, fork_depth=c.head_depth)

    def fork(self, from_branch: int, fork_depth: int) -> int:
        row = BranchRow(campaign_id=self.campaign.id, parent_id=from_branch, fork_depth=fork_depth)
        self.session.add(row)
        self.session.flush()
        self.branches[row.id] = (from_branch, fork_depth)
        return row.id

    def append(self, kind: str, text: str, state: dict, **fields) -> NodeRow:
        """Write one node at the head (forking when needed) and move the head onto it."""
        place = self.next_place()
        branch = place.branch_id
        if branch is None:
            branch = self.fork(place.fork_from, place.fork_depth)
        parent = self.head_node()
        node = self._add(kind, text, state, branch, place.depth, parent.id if parent else None, **fields)
        self.move_head(branch, place.depth, node)
        return node

    def add_take(self, of: NodeRow, text: str, state: dict, **fields) -> NodeRow:
        """A new take beside `of`, on a branch of its own; the head moves onto it."""
        branch = self.fork(of.branch_id, of.depth - 1)
        node = self._add(of.kind, text, state, branch, of.depth, of.parent_id, **fields)
        self.move_head(branch, of.depth, node)
        return node

    def _add(self, kind, text, state, branch, depth, parent_id, **fields) -> NodeRow:
        node = NodeRow(
            campaign_id=self.campaign.id,
            branch_id=branch,
            depth=depth,
            parent_id=parent_id,
            kind=kind,
            text=text,
            raw_text=fields.pop("raw_text", text),
            state_after=state,
            live=True,
            **fields,
        )
        self.session.add(node)
        self.session.flush()
        self._make_live(node)
        return node

    def _make_live(self, node: NodeRow) -> None:
        """Exactly one live take per turn: this one."""
        parent_match = (
            NodeRow.parent_id.is_(None) if node.parent_id is None else NodeRow.parent_id == node.parent_id
        )
        self.session.execute(
            update(NodeRow)
            .where(
                NodeRow.campaign_id == self.campaign.id,
                NodeRow.depth == node.depth,
                parent_match,
                NodeRow.id != node.id,
            )
            .values(live=False)
            .execution_options(synchronize_session=False)
        )
        node.live = True

    # ------------------------------------------------------------ the head
    def move_head(self, branch_id: int | None, depth: int, node: NodeRow | None = None) -> None:
        """Move the head and restore the narrative state of the node it lands on."""
        c = self.campaign
        c.head_branch_id, c.head_depth = branch_id, depth
        if node is None and depth >= 0:
            node = self.node_at(depth)
        c.state = dict(node.state_after or {}) if node is not None else {}

    def undo(self) -> None:
        target = self.undo_target()
        if target is None:
            raise NotAllowed(self.why_not_undo())
        self.move_head(self.campaign.head_branch_id, target)

    def redo(self) -> None:
        target = self.redo_target()
        if target is None:
            raise NotAllowed("Nothing to redo: the story has no later turn on this line.")
        self.move_head(self.campaign.head_branch_id, target)

    def why_not_undo(self) -> str:
        if self.campaign.head_depth < 0:
            return "Nothing to undo: the story has not started."
        return "Nothing to undo: the story is at its opening."

    def select(self, take: NodeRow) -> None:
        """Read the story through `take`: the head moves onto it and it becomes live."""
        if take.kind not in RESTING:
            raise NotAllowed("Only a narration can be chosen as a take.")
        self.move_head(take.branch_id, take.depth, take)
        self._make_live(take)

    # ------------------------------------------------------------ revisions
    def revise(self, node: NodeRow, text: str, reason: str = "edit", record: dict | None = None) -> NodeRevisionRow:
        """Change `node`'s text where it stands: the story after it stays, the
        text it had is kept as a revision. The narrative state is left as it
        was (later snapshots were built on it; a correction changes state)."""
        if text == node.text:
            raise NotAllowed("The passage already says exactly that: nothing to save.")
        row = NodeRevisionRow(campaign_id=self.campaign.id, node_id=node.id, text=node.text, reason=reason,
                              record=record, created_at=utcnow())
        self.session.add(row)
        node.text = text
        if reason != "continued":
            node.edited = True
        self.session.flush()
        return row

    def revisions(self, node: NodeRow) -> list[NodeRevisionRow]:
        """The texts `node` had before each change, oldest first."""
        return list(self.session.scalars(
            select(NodeRevisionRow).where(NodeRevisionRow.node_id == node.id).order_by(NodeRevisionRow.id)))


def texts_as_of(session: Session, node_ids, when: datetime | None) -> dict[int, str]:
    """{node id: the text it had at `when`}, for the nodes revised since then
    (the others still say what they said). The text a node had at `when` is
    the one its first later revision replaced."""
    ids = list(node_ids)
    if when is None or not ids:
        return {}
    out: dict[int, str] = {}
    for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        rows = session.execute(select(NodeRevisionRow.node_id, NodeRevisionRow.text)
                               .where(NodeRevisionRow.node_id.in_(ids[i:i + 500]), NodeRevisionRow.created_at >= when)
                               .order_by(NodeRevisionRow.id))
        for node_id, text in rows:
            out.setdefault(node_id, text)
    return out


def recorded_at(session: Session, node: NodeRow) -> datetime | None:
    """When `node`'s turn record was written: when the narrator last wrote on
    it (a continuation replaces the record), else when it was made."""
    continued = session.scalar(select(func.max(NodeRevisionRow.created_at)).where(
        NodeRevisionRow.node_id == node.id, NodeRevisionRow.reason == "continued"))
    return continued or node.created_at
