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
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ..errors import NotAllowed, NotFound
from ..store import BranchRow, CampaignRow, NodeRow
from .lineage import DEEPEST, Path, branch_table, path_to

__all__ = ["INPUT_KINDS", "RESTING", "StoryTree"]

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
