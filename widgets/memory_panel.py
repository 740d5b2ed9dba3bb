"""Memory: the bank as a list, and the reader's hand on it (add, edit, pin,
delete) through `camp.memories`."""
from __future__ import annotations

import threading

import ipywidgets as w

from engine import Campaign, html

from .common import Confirm, Message, attempt, table_html
from .runner import describe_error

__all__ = ["MemoryPanel"]

NEW = 0  # the dropdown value for "a new memory"
# The panel lists the newest memories; the bank keeps up to memory_capacity
# (200 by default), which is too long to read in a side panel.
SHOWN = 50


class MemoryPanel(w.VBox):
    def __init__(self, camp: Campaign):
        self.camp = camp
        self.listing = w.HTML()
        self.choice = w.Dropdown(description="Memory", options=[("(a new memory)", NEW)],
                                 layout=w.Layout(width="100%", max_width="40em"))
        self.text = w.Textarea(placeholder="What the narrator should remember, e.g. Mara owes Wren a favour.",
                               rows=2, layout=w.Layout(width="100%", max_width="40em"))
        self.save = w.Button(description="Add memory", button_style="primary", layout=w.Layout(width="auto"))
        self.pin = w.Button(description="★ Pin", layout=w.Layout(width="auto"))
        self.delete = w.Button(description="Delete…", layout=w.Layout(width="auto"))
        self.refresh_button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
        self.confirm = Confirm()
        self.message = Message()
        self._frame = None
        self._lock = threading.Lock()
        self._quiet = False  # set while refresh rewrites the options
        super().__init__([self.listing, self.choice, self.text,
                          w.HBox([self.save, self.pin, self.delete, self.refresh_button],
                                 layout=w.Layout(flex_flow="row wrap")),
                          self.confirm, self.message])
        self.choice.observe(lambda _: self._quiet or self._chosen(fill=True), "value")
        self.save.on_click(lambda _: self.save_text())
        self.pin.on_click(lambda _: self.toggle_pin())
        self.delete.on_click(lambda _: self.ask_delete())
        self.refresh_button.on_click(lambda _: self.refresh())
        self.refresh()

    # ------------------------------------------------------------ actions
    def save_text(self) -> None:
        """Add a memory (nothing chosen) or replace the chosen one's text."""
        memory_id, text = self.choice.value, self.text.value
        bank = self.camp.memories
        if memory_id == NEW:
            ok = attempt(lambda: bank.add(text), self.message, "Memory added.")
        else:
            ok = attempt(lambda: bank.edit(memory_id, text), self.message, f"Memory {memory_id} changed.")
        if ok:
            self.refresh(select=memory_id)  # a new memory: the box empties for the next

    def toggle_pin(self) -> None:
        row = self._row()
        if row is None:
            return
        bank, memory_id = self.camp.memories, int(row["id"])
        if row["pinned"]:
            ok = attempt(lambda: bank.unpin(memory_id), self.message, f"Memory {memory_id} unpinned.")
        else:
            ok = attempt(lambda: bank.pin(memory_id), self.message,
                         f"Memory {memory_id} pinned: it is recalled every turn and never forgotten.")
        if ok:
            self.refresh(select=memory_id)

    def ask_delete(self) -> None:
        row = self._row()
        if row is None:
            return
        memory_id = int(row["id"])

        def really() -> None:
            if attempt(lambda: self.camp.memories.delete(memory_id), self.message, f"Memory {memory_id} deleted."):
                self.refresh(select=NEW)
        self.confirm.ask(f"Delete memory {memory_id}? This cannot be undone.", really)

    # ------------------------------------------------------------ view
    def refresh(self, select: int | None = None) -> None:
        with self._lock:
            self._refresh(select)

    def _refresh(self, select: int | None) -> None:
        try:
            frame = self.camp.memories.frame()
        except Exception as exc:  # noqa: BLE001 - shown in place
            self.message.say(describe_error(exc), error=True)
            return
        self._frame = frame
        recent = frame.tail(SHOWN).iloc[::-1]
        if recent.empty:
            self.listing.value = html.tag("p", "No memories yet: they are written as the story settles (every 6 story "
                                          "lines), or add one below.", style="color:#888")
        else:
            rows = [(r.id, ("[inferred] " if r.authority == "heuristic" else "") + r.text,
                     "★ pinned" if r.pinned else "", "forgotten" if r.forgotten else ("" if r.on_path else "other line"),
                     r.use_count) for r in recent.itertuples()]
            self.listing.value = table_html(["id", "memory", "pinned", "", "used"], rows, "sw-memories")
        before = self.choice.value
        current = before if select is None else select
        options = [("(a new memory)", NEW)] + [(f"{r.id}: {_short(r.text)}", int(r.id)) for r in recent.itertuples()]
        self._quiet = True
        try:
            self.choice.options = options
            self.choice.value = current if current in {v for _, v in options} else NEW
        finally:
            self._quiet = False
        # A refresh after a turn must not wipe a memory being written or edited.
        self._chosen(fill=select is not None or self.choice.value != before)

    def _row(self):
        if self._frame is None or self.choice.value == NEW:
            return None
        match = self._frame[self._frame["id"] == self.choice.value]
        return None if match.empty else match.iloc[0]

    def _chosen(self, fill: bool) -> None:
        row = self._row()
        self.confirm.layout.display = "none"
        self.save.description = "Add memory" if row is None else "Save text"
        self.pin.disabled = self.delete.disabled = row is None
        self.pin.description = "Unpin" if row is not None and row["pinned"] else "★ Pin"
        if fill:
            self.text.value = "" if row is None else str(row["text"])


def _short(text: str, words: int = 10) -> str:
    parts = str(text).split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")
