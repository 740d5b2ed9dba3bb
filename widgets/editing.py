"""Editing a passage where it stands, for the campaign app.

Every passage but the opening carries an Edit mark (widgets/keys.py hears
its click); the Edit button opens the newest narration. The story view
opens a larger editor between the passages before and after it.

- **Save** makes a new revision of the passage in place (`camp.revise`): the
  story after it is kept, as in SillyTavern and AI Dungeon, and the text it
  replaced is kept too (the editor's list of earlier texts brings it back).
- **Branch from here** is the separate, named action that starts a new line
  of the story: a corrected narration becomes a new take with its own future
  (`camp.edit`), a corrected line of the player's, or a direction, a new take
  the narrator answers afresh (`camp.edit_line`, a turn). The passage as it
  was keeps its own future either way.

Kept apart from app.py, which mixes it in, so each reads in one go.
"""
from __future__ import annotations

__all__ = ["PassageEditing"]

_EDITED = {"narrator": "Correct the narration, then Save (Ctrl+Enter): the story after it is kept, and so is the "
                       "old text. Branch from here keeps this passage and its future, and starts a new line instead.",
           "player": "Correct your line, then Save (Ctrl+Enter): the story after it is kept, and so is the old "
                     "text. Branch from here plays the corrected line afresh on a new line of the story.",
           "direction": "Correct the direction, then Save (Ctrl+Enter): the story after it is kept, and so is the "
                        "old text. Branch from here has the narrator follow it afresh on a new line of the story."}


class PassageEditing:
    """Mixed into `CampaignApp`: uses its camp, story view, runner, history,
    cut reply, `_turn`, `_move`, `_say` and `_update_controls`."""

    def toggle_edit(self) -> None:
        """The Edit button: open the editor on the newest narration, or close it."""
        if self._editing is not None:
            self.cancel_edit()
            return
        head = self._history[-1] if self._history else None
        if head is None or head.kind != "narrator":
            self._say("Nothing to edit: the newest passage is not a narration.", error=True)
            return
        self.edit_passage(head.id)

    def edit_passage(self, node_id: int) -> None:
        """Open a larger editor where passage `node_id` stands (its ✎ Edit mark)."""
        if self.runner.busy:
            self._say("A turn is being narrated: wait for it, or press Stop.", error=True)
            return
        entry = next((e for e in self._history if e.id == node_id), None)
        if entry is None or entry.kind not in _EDITED:
            self._say("That passage cannot be edited (the opening is part of the campaign's setup).", error=True)
            return
        cut = self._cut.tail if self._cut is not None and self._cut.node_id == node_id else ""
        text = entry.text + (" " + cut if cut and not entry.text.endswith(cut) else "")
        if not self.story.edit_in_place(node_id, text):
            self._say("That passage is not shown here: undo to it, or edit it from code (camp.edit).", error=True)
            return
        try:
            self.story.editor.offer(self.camp.revisions(node_id))
        except Exception:  # noqa: BLE001 - the earlier texts are a convenience; the editor still opens
            self.story.editor.offer([])
        self._editing = node_id
        self._say(_EDITED[entry.kind])
        self._update_controls()

    def cancel_edit(self) -> None:
        if self._editing is None:
            return
        self._editing = None
        self.story.close_editor()
        self._say("Edit cancelled: the passage is as it was.")
        self._update_controls()

    def save_edit(self, text: str | None = None) -> None:
        """Save the open editor as a new revision of the passage, in place: the
        story after it stays, the old text is kept (the editor lists it)."""
        node_id = self._editing
        if node_id is None:
            return
        text = self.story.editor.text.value if text is None else text
        entry = next((e for e in self._history if e.id == node_id), None)
        if entry is not None and entry.text == text.strip():
            self.cancel_edit()
            return

        def save() -> None:
            self.camp.revise(node_id, text)
            self._editing = None
            self.story.close_editor()

        self._move(save, "Saved where it stands; the story after it is kept, and the old text too (✎ Edit lists "
                         "the earlier texts).")

    def branch_edit(self, text: str | None = None) -> None:
        """Branch from the passage being edited: the passage and its future are
        kept as they are, and the text in the box starts a new line of the story."""
        node_id = self._editing
        if node_id is None:
            return
        text = self.story.editor.text.value if text is None else text
        entry = next((e for e in self._history if e.id == node_id), None)
        if entry is not None and entry.kind in ("player", "direction"):
            if not text.strip():
                self._say("The edited line is empty: write it, or Cancel.", error=True)
                return
            self._editing = None
            self.story.close_editor()
            before = [e for e in self._history if e.depth < entry.depth]
            self.story.show(before)
            self._turn(lambda **cb: self.camp.edit_line(node_id, text, **cb), line=text, kind=entry.kind,
                       needs_text=False)
            return

        def branch() -> None:
            self.camp.edit(node_id, text)
            self._editing = None
            self.story.close_editor()

        self._move(branch, "Branched: the corrected narration is a new take with a story of its own; the "
                           "original and everything after it are kept (‹ › on the passage switches back).")
