"""`Campaign`: one story, played and navigated from a notebook.

Every method opens its own short session; nothing here holds the database
between calls, so a campaign object can live in a notebook for hours while
other processes read the same file.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
from sqlalchemy import select

from . import display, narrative
from .bundle import facade
from .errors import NotAllowed, NotFound
from .knowledge import Library
from .memory import current
from .memory.derived import running, status, status_frame, wait
from .memory.summary import SummaryRow
from .memory.summary import record as record_summary
from .memory.view import MemoryBank
from .store import CampaignRow, Database, NodeRow
from .store.narrative_tables import StateEventRow
from .story import StoryTree, savepoints
from .story.lineage import path_to
from .turns import TurnRequest, busy, campaign_lock, dry_run, record, run_turn
from .turns.inputs import direction_line, player_line, story_line
from .turns.record import SECTION_COLUMNS  # noqa: F401  (experiments/accounting.py reads it here)
from .turns.write import edit_take, write_state, write_turn
from .views import Entry, Revision, SavePoint, Turn

if TYPE_CHECKING:
    from .providers import Narrator
    from .providers.embedders import Embedder
    from .settings import Settings

__all__ = ["Campaign", "Services"]

TextCallback = Callable[[str], None] | None


@dataclass(frozen=True)
class Correction:
    """What a correction changed, and what it refused (with the reason)."""

    applied: list
    refused: list
    changes: list

    @property
    def message(self) -> str:
        done = f"Applied {len(self.applied)} correction(s)."
        if not self.refused:
            return done
        return done + " Refused: " + "; ".join(f"{_event_name(e)}: {r}" for e, r in self.refused) + "."

    def __repr__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Services:
    """What a campaign plays with, handed to it by whoever opened the file:
    the database, and callables for what can be reconfigured between turns
    (narrator, settings, embedder) and for the derived work after a turn."""

    db: Database
    narrator: Callable[[], Narrator]
    settings: Callable[[], Settings]
    embedder: Callable[[], Embedder | None]
    after_turn: Callable[[int], None]
    background: bool = True  # derived work in a thread (False: inline, for experiments)
    owner: Any = None  # the Workbench, for notebooks (`camp.workbench`); never called from here


class Campaign:
    def __init__(self, services: Services, campaign_id: int):
        self.services = services
        self.id = campaign_id
        self._cancel: threading.Event | None = None

    @property
    def workbench(self):
        """The Workbench that opened this campaign (for notebooks and users' code)."""
        return self.services.owner

    # ------------------------------------------------------------ plumbing
    @property
    def _db(self):
        return self.services.db

    def _lock(self, doing: str):
        return campaign_lock(str(self._db.path), self.id, doing)

    def _row(self, session) -> CampaignRow:
        row = session.get(CampaignRow, self.id)
        if row is None:
            raise NotFound(f"Campaign {self.id} no longer exists in {self._db.path}.")
        return row

    def _tree(self, session) -> StoryTree:
        return StoryTree(session, self._row(session))

    def _change(self, doing: str, fn):
        with self._lock(doing), self._db.writing() as session:
            return fn(self._tree(session))

    # ------------------------------------------------------------ facts
    @property
    def title(self) -> str:
        with self._db.reading() as s:
            return self._row(s).title

    @property
    def state(self) -> dict:
        """The authoritative narrative state at the head."""
        with self._db.reading() as s:
            return dict(self._row(s).state or {})

    @property
    def head(self) -> tuple[int | None, int]:
        with self._db.reading() as s:
            row = self._row(s)
            return row.head_branch_id, row.head_depth

    @property
    def can_undo(self) -> bool:
        with self._db.reading() as s:
            return self._tree(s).undo_target() is not None

    @property
    def can_redo(self) -> bool:
        with self._db.reading() as s:
            return self._tree(s).redo_target() is not None

    @property
    def can_retry(self) -> bool:
        with self._db.reading() as s:
            head = self._tree(s).head_node()
            return head is not None and head.kind == "narrator"

    @property
    def busy(self) -> bool:
        return busy(str(self._db.path), self.id)

    # ------------------------------------------------------------ playing
    def _play(self, request: TurnRequest, on_text: TextCallback, on_reasoning: TextCallback,
              on_status: TextCallback = None) -> Turn:
        with self._lock("start another turn"):
            self._cancel = threading.Event()
            try:
                turn = run_turn(
                    self._db, self.id, self.services.narrator(), self.services.settings(), request,
                    on_text=on_text, on_reasoning=on_reasoning, cancel=self._cancel,
                    embedder=self.services.embedder(), on_status=on_status,
                )
            finally:
                self._cancel = None
        self.services.after_turn(self.id)
        return turn

    def act(self, text: str, *, mode: str = "do", on_text: TextCallback = None, on_reasoning: TextCallback = None,
                       on_status: TextCallback = None) -> Turn:
        """Do or say something: 'open the door', 'I draw my sword', '"Who's there?"',
        'Mara: "The tide turns at six."' (a line by Mara, kept as written).
        `mode="story"` is Story mode, as AI Dungeon's: the text goes into the
        story exactly as typed (no "You", no marker), and the narrator goes on
        from it."""
        if mode not in ("do", "story"):
            raise NotAllowed(f"act(mode=...) is 'do' (an action or a line of speech) or 'story' (prose added as "
                             f"written), not {mode!r}.")
        return self._play(TurnRequest("story" if mode == "story" else "act", text), on_text, on_reasoning, on_status)

    def continue_story(self, *, on_text: TextCallback = None, on_reasoning: TextCallback = None,
                       on_status: TextCallback = None) -> Turn:
        """A beat the player does not act in."""
        return self._play(TurnRequest("continue"), on_text, on_reasoning, on_status)

    def extend(self, *, on_text: TextCallback = None, on_reasoning: TextCallback = None,
               on_status: TextCallback = None) -> Turn:
        """Continue the newest narration itself, as SillyTavern's continue does:
        the narrator writes on from where it stops (a cut reply from its cut),
        and the passage becomes one longer passage, the same take. Its text
        before is kept as a revision (`revisions`)."""
        return self._play(TurnRequest("extend"), on_text, on_reasoning, on_status)

    def direct(self, text: str, *, on_text: TextCallback = None, on_reasoning: TextCallback = None,
                       on_status: TextCallback = None) -> Turn:
        """Speak to the narrator, out of character: 'Make the storm break.'"""
        return self._play(TurnRequest("direct", text), on_text, on_reasoning, on_status)

    def retry(self, *, on_text: TextCallback = None, on_reasoning: TextCallback = None,
                       on_status: TextCallback = None) -> Turn:
        """Another take of the newest narration; the old take is kept."""
        return self._play(TurnRequest("retry"), on_text, on_reasoning, on_status)

    def context(self, text: str | None = None, *, mode: str | None = None, held: dict | None = None):
        """Dry run: the report the next turn would be built with (an `act` of
        `text` if given, else a continue; `mode="story"` for Story mode). Calls
        no model and loads none. `held`: the summary and memories an earlier
        prompt held (its report's "held"), in place of the newest turn's, to
        see the prompt that would follow that one."""
        request = TurnRequest({"do": "act"}.get(mode, mode) or ("act" if text else "continue"), text or "")
        return dry_run(self._db, self.id, self.services.narrator(), self.services.settings(), request,
                       self.services.embedder(), held=held).report

    # ------------------------------------------------------------ narrative state
    def correct(self, events, note: str = "") -> Correction:
        """Your corrections outrank the story: applied to the state at the head
        and kept in its snapshot. Refused events come back with the reason."""
        events = [events] if isinstance(events, dict) else list(events)

        def go(tree: StoryTree) -> Correction:
            node = tree.head_node()
            if node is None:
                raise NotAllowed("There is no story yet to correct.")
            before = dict(tree.campaign.state or {})
            outcome = write_state(tree.session, tree.campaign, node, before, events, source="correction", note=note)
            if not outcome.accepted:  # raised inside the transaction: nothing is written
                raise NotAllowed("Nothing was corrected: " + "; ".join(
                    f"{_event_name(e)}: {r}" for e, r in outcome.rejected) + ".")
            return Correction([i["event"] for i in outcome.accepted],
                              [(e, str(r)) for e, r in outcome.rejected],
                              narrative.describe_diff(narrative.diff(before, outcome.state)))
        return self._change("correct the state", go)

    def events(self) -> pd.DataFrame:
        """The audit list: every proposed or corrected event, applied or refused, and whether
        it lies on the story being read."""
        with self._db.reading() as s:
            path = self._tree(s).path()
            rows = s.execute(select(StateEventRow, NodeRow.branch_id, NodeRow.depth)
                             .join(NodeRow, NodeRow.id == StateEventRow.node_id, isouter=True)
                             .where(StateEventRow.campaign_id == self.id).order_by(StateEventRow.id)).all()
            data = [{"id": e.id, "node_id": e.node_id, "depth": depth, "source": e.source,
                     "type": _event_name(e.event), "event": e.event, "accepted": e.accepted, "reason": e.reason,
                     "note": e.note, "on_path": path.contains(branch, depth)} for e, branch, depth in rows]
        return pd.DataFrame(data, columns=["id", "node_id", "depth", "source", "type", "event", "accepted",
                                           "reason", "note", "on_path"])

    def stored_replies(self) -> list[tuple[int, str]]:
        """Every narration ever stored (all takes, all lines): what the leak count reads."""
        with self._db.reading() as s:
            return list(s.execute(select(NodeRow.id, NodeRow.text).where(
                NodeRow.campaign_id == self.id, NodeRow.kind == "narrator").order_by(NodeRow.id)).all())

    # ------------------------------------------------------------ moving
    def export(self, path):
        """The whole campaign as one JSON file (no machine settings travel); reports its
        size and whether this version can import it back."""
        scrubbed = facade.machine_text(self._db.path, self.services.settings().endpoint_url)
        return facade.export_campaign(self._db, self.id, path, machine_text=scrubbed)

    def story_cards(self) -> pd.DataFrame:
        """Story cards (AI Dungeon / SillyTavern world info) kept as campaign data."""
        return facade.story_cards(self._db, self.id)

    def add_story_card(self, title: str = "", keys=(), entry: str = "", **fields) -> int:
        """A card that enters the prompt when a key appears in the recent story
        or your input (constant=True: always); its id."""
        return facade.add_story_card(self._db, self.id, title=title, keys=keys, entry=entry, **fields)

    def edit_story_card(self, card_id: int, **changes):
        return facade.edit_story_card(self._db, self.id, card_id, **changes)

    def delete_story_card(self, card_id: int) -> None:
        facade.delete_story_card(self._db, self.id, card_id)

    # ------------------------------------------------------------ knowledge
    @property
    def knowledge(self):
        """The imported knowledge library: add, list, passages, reclassify, enable /
        disable, hide / show, always_include, delete, reindex, status."""
        return Library(self._db, self.id, self.services.embedder, settings=self.services.settings,
                       background=self.services.background)

    # ------------------------------------------------------------ memory
    @property
    def memories(self):
        """The memory bank (all of it, forgotten ones included): a DataFrame via
        `.frame()`, and pin / unpin / edit / delete / add."""
        return MemoryBank(self._db, self.id)

    @property
    def summary(self) -> str:
        """The story summary valid where the story is being read ("" if none yet)."""
        with self._db.reading() as s:
            row = current(s, self._tree(s).path())
            return row.text if row else ""

    def set_summary(self, text: str) -> None:
        """Your own summary, anchored at the head like a generated one."""
        self._change("set the summary", lambda tree: record_summary(tree.session, tree.campaign, text,
                                                                source_start=None, trigger="manual"))

    def summaries(self) -> pd.DataFrame:
        """Every summary ever written, with whether it applies at the head."""
        with self._db.reading() as s:
            path = self._tree(s).path()
            rows = s.scalars(select(SummaryRow).where(SummaryRow.campaign_id == self.id).order_by(SummaryRow.id)).all()
            return pd.DataFrame([{"id": r.id, "depth": r.depth, "source_start": r.source_start, "source_end": r.source_end,
                                  "trigger": r.trigger, "eligible": path.contains(r.branch_id, r.depth), "text": r.text}
                                 for r in rows], columns=["id", "depth", "source_start", "source_end", "trigger",
                                                          "eligible", "text"])

    def derived(self) -> pd.DataFrame:
        """ok / idle / failed for each kind of derived work, with the reason."""
        with self._db.reading() as s:
            return status_frame(status(s, self.id))

    @property
    def deriving(self) -> bool:
        """Whether memories, summary or embeddings are being worked out in the background."""
        return running(self._db, self.id)

    def wait_derived(self, timeout: float | None = None) -> None:
        """Block until background derived work for this campaign has finished."""
        wait(self._db, self.id, timeout)

    def stop(self) -> None:
        """Cancel the turn being narrated; it writes nothing."""
        if self._cancel is not None:
            self._cancel.set()

    # ------------------------------------------------------------ navigating
    def undo(self) -> None:
        self._change("undo", lambda tree: tree.undo())

    def redo(self) -> None:
        self._change("redo", lambda tree: tree.redo())

    def takes(self, node_id: int | None = None) -> list[Entry]:
        """The takes of a narration (the newest by default), oldest first."""
        with self._db.reading() as s:
            tree = self._tree(s)
            node = tree.node(node_id) if node_id is not None else tree.head_node()
            if node is None:
                return []
            takes = tree.takes(node)
            return [_entry(n, i + 1, len(takes)) for i, n in enumerate(takes)]

    def select_take(self, n: int, node_id: int | None = None) -> Entry:
        """Read the story through take `n` (1-based) of a narration."""
        def go(tree: StoryTree):
            node = tree.node(node_id) if node_id is not None else tree.head_node()
            if node is None:
                raise NotAllowed("There is no narration here to choose a take of.")
            takes = tree.takes(node)
            if not 1 <= n <= len(takes):
                raise NotAllowed(f"Take {n} does not exist: this turn has takes 1 to {len(takes)}.")
            tree.select(takes[n - 1])
            return _entry(takes[n - 1], n, len(takes))
        return self._change("switch takes", go)

    def edit(self, node_id: int, text: str) -> Turn:
        """Correct a narration. The correction becomes a new take read from here
        on; the original is kept with its own future."""
        text = (text or "").strip()
        if not text:
            raise NotAllowed("An edit needs the corrected text; to remove a turn, use undo.")

        extraction = narrative.split(text)
        if not extraction.prose.strip():
            raise NotAllowed("The edit has no story text left once its state block is set aside.")

        def go(tree: StoryTree) -> int:
            node = tree.node(node_id)
            if node.kind != "narrator":
                raise NotAllowed("Only narration can be edited; to change what you did, undo and act again.")
            before = tree.node_at(node.depth - 1, tree_path(tree, node)) if node.depth > 0 else None
            state = dict(before.state_after or {}) if before is not None else {}
            return write_turn(tree.session, tree.campaign, edit_take(node.id, state, text, extraction))
        return self._change("edit", go)

    def revise(self, node_id: int, text: str) -> Entry:
        """Correct a passage where it stands: the story after it stays as it is,
        and the text it replaced is kept (`revisions`, `restore_revision`). A
        narration loses any state block (the state is corrected with
        `correct`); your own line is written as the story records lines
        ("open the door" -> "> You open the door."), and a Story passage stays
        prose, as typed."""
        def go(tree: StoryTree) -> Entry:
            node = tree.node(node_id)
            tree.revise(node, _revised_text(node.kind, text, node.text))
            return self._entry_of(tree, node)
        return self._change("edit a passage", go)

    def revisions(self, node_id: int) -> list[Revision]:
        """Every text a passage has had, oldest first; the last is the one shown."""
        with self._db.reading() as s:
            tree = self._tree(s)
            node = tree.node(node_id)
            rows = tree.revisions(node)
            out = [Revision(i + 1, r.text, False, r.reason, r.created_at) for i, r in enumerate(rows)]
            return [*out, Revision(len(rows) + 1, node.text, True)]

    def restore_revision(self, node_id: int, n: int) -> Entry:
        """Bring back text `n` of a passage (`revisions`); the text it replaces is kept too."""
        def go(tree: StoryTree) -> Entry:
            node = tree.node(node_id)
            rows = tree.revisions(node)
            if not 1 <= n <= len(rows):
                raise NotAllowed(f"Revision {n} is not an earlier text of this passage: it has "
                                 f"{len(rows)} earlier text(s), 1 to {len(rows)}." if rows else
                                 "This passage has never been changed: there is no earlier text to bring back.")
            tree.revise(node, rows[n - 1].text, reason="restored")
            return self._entry_of(tree, node)
        return self._change("restore a revision", go)

    def branch(self, node_id: int, text: str, *, on_text: TextCallback = None, on_reasoning: TextCallback = None,
               on_status: TextCallback = None):
        """Branch from a passage: a narration's new text becomes a new take with
        its own future (`edit`); your own line's new text is played afresh
        (`edit_line`, a turn). The passage as it was keeps its own future
        (‹ › or Redo returns to it). Returns the Turn."""
        with self._db.reading() as s:
            kind = self._tree(s).node(node_id).kind
        if kind == "narrator":
            return self.edit(node_id, text)
        if kind in ("player", "direction"):
            return self.edit_line(node_id, text, on_text=on_text, on_reasoning=on_reasoning, on_status=on_status)
        raise NotAllowed("The opening cannot be branched from: it is where every line of the story starts.")

    def _entry_of(self, tree: StoryTree, node: NodeRow) -> Entry:
        counts = _take_counts(tree.session, self.id, [node])
        return _entry(node, *counts.get(node.id, (1, 1)))

    def save_point(self, name: str, note: str = "") -> SavePoint:
        return self._change("make a save point", lambda tree: _save_point(savepoints.create(tree, name, note)))

    def restore(self, save_point: SavePoint | int) -> None:
        sp_id = save_point.id if isinstance(save_point, SavePoint) else save_point
        self._change("restore a save point", lambda tree: savepoints.restore(tree, sp_id))

    def delete_save_point(self, save_point: SavePoint | int) -> None:
        sp_id = save_point.id if isinstance(save_point, SavePoint) else save_point
        self._change("delete a save point", lambda tree: savepoints.delete(tree, sp_id))

    def save_points(self) -> list[SavePoint]:
        with self._db.reading() as s:
            return [_save_point(r) for r in savepoints.listing(self._tree(s))]

    # ------------------------------------------------------------ reading
    def history(self) -> list[Entry]:
        """The story being read, opening to head."""
        with self._db.reading() as s:
            tree = self._tree(s)
            nodes = tree.path().nodes(s)
            counts = _take_counts(s, self.id, nodes)
            return [_entry(n, *counts.get(n.id, (1, 1))) for n in nodes]

    def turn(self, node_id: int) -> Turn:
        """The record of one take (its report read when first asked for)."""
        with self._db.reading() as s:
            tree = self._tree(s)
            node = tree.node(node_id)
            takes = tree.takes(node)
            row = next(record.stored_rows(s, [node_id]), None)
            parent = s.get(NodeRow, node.parent_id) if node.parent_id else None
            return record.from_row(
                node, row, input=parent.text if parent is not None and parent.kind in ("player", "direction") else None,
                take=[t.id for t in takes].index(node.id) + 1, takes=len(takes),
                report_from=lambda: self._report(node_id))

    def _report(self, node_id: int):
        with self._db.reading() as s:
            return record.load_report(s, self._tree(s).node(node_id))

    def records(self, *, takes: str = "played") -> pd.DataFrame:
        """One row per narration: `takes="played"` (the default) covers the story
        being read, opening to head; `takes="all"` every take ever written, each
        with `on_path`. Columns are `engine.turns.record.RECORD_COLUMNS` after the
        story ones; no prompt text is loaded (`camp.turn(node_id).report` has it)."""
        if takes not in ("played", "all"):
            raise NotAllowed(f"records(takes=...) is 'played' or 'all', not {takes!r}.")
        with self._db.reading() as s:
            path = self._tree(s).path()
            if takes == "played":
                nodes = path.nodes(s)
            else:
                nodes = list(s.scalars(select(NodeRow).where(NodeRow.campaign_id == self.id).order_by(NodeRow.depth,
                                                                                                     NodeRow.id)))
            by_id = {n.id: n for n in nodes}
            narrations = [n for n in nodes if n.kind == "narrator"]
            rows = {r.node_id: r for r in record.stored_rows(s, [n.id for n in narrations])}
            missing = {n.parent_id for n in narrations if n.parent_id not in by_id and n.parent_id is not None}
            by_id.update({n.id: n for n in s.scalars(select(NodeRow).where(NodeRow.id.in_(missing)))})
            counts = _take_counts(s, self.id, narrations)
            data = [_record_row(i + 1, n, by_id.get(n.parent_id), rows.get(n.id), counts.get(n.id, (1, 1)),
                                path.contains(n.branch_id, n.depth)) for i, n in enumerate(narrations)]
        frame = pd.DataFrame(data, columns=STORY_COLUMNS + record.RECORD_COLUMNS)
        frame.attrs.update(takes=takes, campaign_id=self.id, record_version=record.RECORD_VERSION,
                           covers="the story being read, opening to head" if takes == "played"
                           else "every take ever written (on_path marks the story being read)")
        return frame

    @property
    def story(self) -> str:
        """The story being read as plain text."""
        return "\n\n".join(e.text for e in self.history())

    def _repr_html_(self) -> str:
        return display.story_html(self.title, self.history())

    def __repr__(self) -> str:
        return f"<Campaign {self.id} {self.title!r}>"

    # ------------------------------------------------------------ media (engine.media)
    # Presentation only: none of these writes the state, moves the head or
    # records an event; each delegates to engine.media with plain values.
    def scene(self, start: int | None = None, end: int | None = None):
        """The scene at the head as a packet for an image, video or speech model:
        a dict that shows as a table in a notebook. `start`/`end` name a depth range."""
        from .media.scene import build

        return build(self._db, self.id, start, end)

    def visual_profiles(self) -> dict[str, dict]:
        """Every visual profile of the campaign, by entity key."""
        from .media.profiles import all_profiles

        return all_profiles(self._db, self.id)

    def visual_profile(self, entity: str) -> dict | None:
        """How `entity` (its key in the state) should look, or None when it has no profile."""
        from .media.profiles import profile

        return profile(self._db, self.id, entity)

    def set_visual_profile(self, entity: str, descriptors: dict | None = None, features: list | None = None,
                           style_notes: str | None = None) -> dict:
        """Replace `entity`'s profile: descriptors {trait: words}, features [phrases], style notes."""
        from .media.profiles import set_profile

        return set_profile(self._db, self.id, entity, descriptors, features, style_notes)

    def delete_visual_profile(self, entity: str) -> None:
        """Remove `entity`'s profile; the entity stays in the story."""
        from .media.profiles import delete_profile

        delete_profile(self._db, self.id, entity)

    # ------------------------------------------------------------ the player's table
    # Thin: each delegates to engine.story with plain values.
    @property
    def authors_note(self) -> str:
        """A short standing instruction placed near the end of the prompt ("" when none)."""
        from .story.notes import authors_note

        with self._db.reading() as s:
            return authors_note(s, self.id)

    def set_authors_note(self, text: str) -> str:
        """Replace the author's note ("" removes it); it applies from the next turn.
        Its bound (engine.budget.standing) is checked here, where tokens can be
        counted: the story layer below has no counter."""
        from .budget import standing
        from .story.notes import set_authors_note

        standing.check("authors_note", text, NotAllowed)
        return self._change("set the author's note", lambda tree: set_authors_note(tree.session, self.id, text))

    def edit_line(self, node_id: int, text: str, *, on_text: TextCallback = None,
                  on_reasoning: TextCallback = None, on_status: TextCallback = None) -> Turn:
        """Correct one of your own lines (or a direction) where it stands: the
        story goes back to just before it and plays the corrected line, which
        becomes a new take of it; the original line keeps its own future (Redo
        or a take switch returns to it). A turn, like `act`."""
        def back(tree: StoryTree) -> str:
            node = tree.node(node_id)
            if node.kind not in ("player", "direction"):
                raise NotAllowed("Only your own lines and directions are edited this way; a narration is "
                                 "corrected with camp.edit(node_id, text).")
            parent = tree.session.get(NodeRow, node.parent_id) if node.parent_id else None
            if parent is None:
                raise NotAllowed("That line has nothing before it to go back to.")
            tree.move_head(parent.branch_id, parent.depth, parent)
            return node.kind

        if not (text or "").strip():
            raise NotAllowed("An edited line needs its text; to remove a turn, use undo.")
        kind = self._change("go back to your line", back)
        play = self.direct if kind == "direction" else self.act
        return play(text, on_text=on_text, on_reasoning=on_reasoning, on_status=on_status)


STORY_COLUMNS = ["turn", "node_id", "depth", "mode", "input", "text", "words", "take", "takes", "on_path",
                 "created_at"]


def _record_row(turn, node, parent, row, take_count, on_path: bool) -> dict:
    mode = {"player": "act", "direction": "direct"}.get(parent.kind, "continue") if parent else "continue"
    story = {
        "turn": turn, "node_id": node.id, "depth": node.depth, "mode": "edit" if node.edited else mode,
        "input": parent.text if parent is not None and parent.kind in ("player", "direction") else "",
        "text": node.text, "words": len(node.text.split()), "take": take_count[0], "takes": take_count[1],
        "on_path": on_path, "created_at": node.created_at,
    }
    if row is None:
        return {**story, **dict.fromkeys(record.RECORD_COLUMNS)}
    return {**story, **record.from_row(node, row).columns()}


def _revised_text(kind: str, text: str, current: str = "") -> str:
    """A revision's text as the story keeps that kind of passage. A reader's
    passage that is not an action line (every action line starts "> ") was
    written in Story mode and is kept as typed."""
    text = (text or "").strip()
    if kind == "player":
        return player_line(text) if current.startswith(">") else story_line(text)
    if kind == "direction":
        return direction_line(text)
    prose = narrative.split(text).prose.strip() if kind == "narrator" else text
    if not prose:
        raise NotAllowed("An edited passage needs its text (a state block alone is not story); to remove a "
                         "turn, use undo.")
    return prose


def _event_name(event) -> str:
    return event.get("type", "?") if isinstance(event, dict) else type(event).__name__


def _entry(node: NodeRow, take: int = 1, takes: int = 1) -> Entry:
    return Entry(node.id, node.kind, node.text, node.depth, take, takes, bool(node.edited))


def _save_point(row) -> SavePoint:
    return SavePoint(row.id, row.name, row.note, row.depth, row.created_at)


def tree_path(tree: StoryTree, node: NodeRow):
    return path_to(tree.branches, node.branch_id, node.depth)


def _take_counts(session, campaign_id: int, nodes) -> dict[int, tuple[int, int]]:
    """{node id: (take number, take count)} for nodes whose turn has several takes."""
    narrations = [n for n in nodes if n.kind == "narrator"]
    if not narrations:
        return {}
    parents = {n.parent_id for n in narrations if n.parent_id is not None}
    groups: dict[tuple, list[int]] = {}
    rows = session.execute(
        select(NodeRow.id, NodeRow.parent_id, NodeRow.depth)
        .where(NodeRow.campaign_id == campaign_id, NodeRow.parent_id.in_(parents), NodeRow.kind == "narrator")
        .order_by(NodeRow.id)
    )
    for nid, parent, depth in rows:
        groups.setdefault((parent, depth), []).append(nid)
    out = {}
    for n in narrations:
        ids = groups.get((n.parent_id, n.depth), [n.id])
        if len(ids) > 1:
            out[n.id] = (ids.index(n.id) + 1, len(ids))
    return out
