"""Save points: a named position the reader can return to.

A save point records the head (branch and depth), not a copy of the story, so
it costs one row; restoring moves the head back there through the same path
as every other head move, which restores the narrative state of that node.
Its branch cannot be removed while it exists (a foreign key without cascade).
"""
from __future__ import annotations

from sqlalchemy import select

from ..errors import NotAllowed, NotFound
from ..store import SavePointRow
from .tree import StoryTree

__all__ = ["create", "delete", "listing", "restore"]


def create(tree: StoryTree, name: str, note: str = "") -> SavePointRow:
    c = tree.campaign
    name = (name or "").strip()
    if not name:
        raise NotAllowed("A save point needs a name, such as 'before the crypt'.")
    if c.head_depth < 0 or c.head_branch_id is None:
        raise NotAllowed("Nothing to save yet: the story has not started.")
    row = SavePointRow(
        campaign_id=c.id, name=name[:200], note=note, branch_id=c.head_branch_id, depth=c.head_depth
    )
    tree.session.add(row)
    tree.session.flush()
    return row


def _get(tree: StoryTree, save_point_id: int) -> SavePointRow:
    row = tree.session.get(SavePointRow, save_point_id)
    if row is None or row.campaign_id != tree.campaign.id:
        raise NotFound(f"There is no save point {save_point_id} in this campaign.")
    return row


def restore(tree: StoryTree, save_point_id: int) -> SavePointRow:
    row = _get(tree, save_point_id)
    tree.move_head(row.branch_id, row.depth)
    return row


def delete(tree: StoryTree, save_point_id: int) -> None:
    tree.session.delete(_get(tree, save_point_id))


def listing(tree: StoryTree) -> list[SavePointRow]:
    return list(
        tree.session.scalars(
            select(SavePointRow)
            .where(SavePointRow.campaign_id == tree.campaign.id)
            .order_by(SavePointRow.id)
        )
    )
