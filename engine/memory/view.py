"""`camp.memories`: the bank as a reader sees and edits it."""
from __future__ import annotations

import pandas as pd
from sqlalchemy import select

from .. import html
from ..errors import NotAllowed, NotFound
from ..store import CampaignRow
from ..store.memory_tables import MemoryRow
from ..story import StoryTree
from ..story.locks import campaign_lock
from .authority import classify_authority
from .bank import set_vector

__all__ = ["MemoryBank", "COLUMNS"]

COLUMNS = ["id", "text", "authority", "source_start", "source_end", "depth", "on_path", "pinned", "forgotten",
           "use_count", "last_used_at", "embedded"]


class MemoryBank:
    """Takes a database and a campaign id, not the `Campaign`: the memory
    layer sits below the facade and never calls into it."""

    def __init__(self, db, campaign_id: int):
        self._db, self.campaign_id = db, campaign_id

    def _tree(self, session) -> StoryTree:
        row = session.get(CampaignRow, self.campaign_id)
        if row is None:
            raise NotFound(f"Campaign {self.campaign_id} no longer exists in {self._db.path}.")
        return StoryTree(session, row)

    def _change(self, doing: str, fn):
        with campaign_lock(str(self._db.path), self.campaign_id, doing), self._db.writing() as session:
            return fn(self._tree(session))

    def frame(self) -> pd.DataFrame:
        with self._db.reading() as s:
            path = self._tree(s).path()
            rows = s.scalars(select(MemoryRow).where(MemoryRow.campaign_id == self.campaign_id)
                             .order_by(MemoryRow.id)).all()
            data = [{"id": r.id, "text": r.text, "authority": r.authority, "source_start": r.source_start,
                     "source_end": r.source_end, "depth": r.depth, "on_path": path.contains(r.branch_id, r.depth),
                     "pinned": r.pinned, "forgotten": r.forgotten, "use_count": r.use_count,
                     "last_used_at": r.last_used_at, "embedded": bool(r.vector_model)} for r in rows]
        return pd.DataFrame(data, columns=COLUMNS)

    def __len__(self) -> int:
        return len(self.frame())

    def __iter__(self):
        return iter(self.frame().to_dict("records"))

    def _edit(self, memory_id: int, doing: str, change) -> None:
        def go(tree):
            row = tree.session.get(MemoryRow, memory_id)
            if row is None or row.campaign_id != self.campaign_id:
                raise NotFound(f"There is no memory {memory_id} in this campaign; camp.memories.frame() lists them.")
            change(tree.session, row)
        self._change(doing, go)

    def pin(self, memory_id: int) -> None:
        """Pinned memories are always recalled and never evicted."""
        self._edit(memory_id, "pin a memory", lambda s, r: setattr(r, "pinned", True))

    def unpin(self, memory_id: int) -> None:
        self._edit(memory_id, "unpin a memory", lambda s, r: setattr(r, "pinned", False))

    def edit(self, memory_id: int, text: str) -> None:
        text = (text or "").strip()
        if not text:
            raise NotAllowed("A memory needs some text; to remove one, use delete.")

        def change(session, row):
            row.text, row.authority = text, classify_authority(text)
            set_vector(session, row, None, "", str(self._db.path))  # re-embedded after the next turn

        self._edit(memory_id, "edit a memory", change)

    def delete(self, memory_id: int) -> None:
        self._edit(memory_id, "delete a memory", lambda s, r: s.delete(r))

    def add(self, text: str, *, pinned: bool = False) -> int:
        """A memory of your own, attached to the node at the head."""
        text = (text or "").strip()
        if not text:
            raise NotAllowed("A memory needs some text.")

        def go(tree):
            node = tree.head_node()
            if node is None:
                raise NotAllowed("Play a turn first: a memory is attached to a point in the story.")
            row = MemoryRow(campaign_id=tree.campaign.id, text=text, branch_id=node.branch_id, depth=node.depth,
                            source_start=node.depth, source_end=node.depth, authority=classify_authority(text),
                            pinned=pinned)
            tree.session.add(row)
            tree.session.flush()
            return row.id
        return self._change("add a memory", go)

    def _repr_html_(self) -> str:
        df = self.frame()
        if df.empty:
            return html.tag("p", "No memories yet: the first is written once the story has 12 settled story nodes.")
        head = html.tag("tr", html.Html("").join(
            html.tag("th", h) for h in ("id", "memory", "covers", "pinned", "", "used")))
        rows = html.Html("").join(
            html.tag("tr", html.Html("").join(html.tag("td", cell) for cell in (
                r.id, ("[inferred] " if r.authority == "heuristic" else "") + r.text, f"{r.source_start}–{r.source_end}",
                "📌" if r.pinned else "", "forgotten" if r.forgotten else "", r.use_count)),
                style="color:#999" if r.forgotten or not r.on_path else "")
            for r in df.itertuples())
        return html.tag("table", head + rows)
