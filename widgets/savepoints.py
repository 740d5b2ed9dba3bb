"""Save points: make one with a name, pick one, restore it, delete it.

Deleting cannot be undone, so it takes two clicks: Delete asks, and only
"Yes, delete" deletes. Restoring moves the head like Undo does (nothing is
lost), so it happens at once.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from html import escape

import ipywidgets as w

from engine import Campaign

from .runner import describe_error

__all__ = ["SavePointsBar"]


class SavePointsBar:
    """`changed()` is called after a restore (the story moved); `say(msg, error)` shows messages."""

    def __init__(self, camp: Campaign, changed: Callable[[], None], say: Callable[..., None]):
        self.camp, self._changed, self._say = camp, changed, say
        self.name = w.Text(placeholder="Name, e.g. before the crypt", layout=w.Layout(width="16em"))
        self.create = w.Button(description="Save point", tooltip="Remember this place in the story.")
        self.choice = w.Dropdown(options=[], layout=w.Layout(width="18em"))
        self._refreshing = threading.Lock()
        self.restore = w.Button(description="Restore", tooltip="Go back to the chosen save point.")
        self.delete = w.Button(description="Delete…", tooltip="Delete the chosen save point (asks first).")
        self.confirm_text = w.HTML()
        self.confirm = w.Button(description="Yes, delete", button_style="danger")
        self.cancel = w.Button(description="Cancel")
        self.confirm_row = w.HBox([self.confirm_text, self.confirm, self.cancel])
        self.confirm_row.layout.display = "none"
        self.widget = w.VBox([w.HBox([self.name, self.create, self.choice, self.restore, self.delete]),
                              self.confirm_row])
        self.create.on_click(lambda _: self.save())
        self.restore.on_click(lambda _: self.go_back())
        self.delete.on_click(lambda _: self.ask_delete())
        self.confirm.on_click(lambda _: self.really_delete())
        self.cancel.on_click(lambda _: self._hide_confirm())
        self.name.observe(lambda _: self._enable(), "value")
        self.choice.observe(lambda _: self._hide_confirm(), "value")
        self._busy = False
        self.refresh()

    # ------------------------------------------------------------ actions
    def save(self) -> None:
        if self._attempt(lambda: self.camp.save_point(self.name.value)):
            self._say(f"Saved point '{self.name.value.strip()}'.")
            self.name.value = ""
            self.refresh()

    def go_back(self) -> None:
        if self.choice.value is None:
            return
        label = self.choice.label
        if self._attempt(lambda: self.camp.restore(self.choice.value)):
            self._changed()
            self._say(f"Restored save point {label}.")

    def ask_delete(self) -> None:
        """The confirmation step: nothing is deleted until 'Yes, delete'."""
        if self.choice.value is None:
            return
        self.confirm_text.value = f"Delete save point <b>{escape(self.choice.label)}</b>? This cannot be undone."
        self.confirm_row.layout.display = ""

    def really_delete(self) -> None:
        if self.choice.value is None:
            return
        label = self.choice.label
        if self._attempt(lambda: self.camp.delete_save_point(self.choice.value)):
            self._say(f"Deleted save point {label}.")
        self._hide_confirm()
        self.refresh()

    # ------------------------------------------------------------ view
    def refresh(self) -> None:
        """Re-read the list (another window may have changed it); serialised, as
        the turn thread and the derived-work thread both refresh."""
        with self._refreshing:
            self._refresh()

    def _refresh(self) -> None:
        try:
            points = self.camp.save_points()
        except Exception as exc:  # noqa: BLE001 - shown, not raised
            self._say(describe_error(exc), error=True)
            points = []
        current = self.choice.value
        self.choice.options = [(f"{p.name} · depth {p.depth}", p.id) for p in reversed(points)]
        ids = [p.id for p in points]
        self.choice.value = current if current in ids else (ids[-1] if ids else None)
        self._enable()

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        if busy:
            self._hide_confirm()
        self._enable()

    def _enable(self) -> None:
        idle, chosen = not self._busy, self.choice.value is not None
        self.create.disabled = not (idle and self.name.value.strip())
        self.restore.disabled = self.delete.disabled = not (idle and chosen)
        self.choice.disabled = not chosen
        self.name.disabled = self._busy

    def _hide_confirm(self) -> None:
        self.confirm_row.layout.display = "none"
        self.confirm_text.value = ""

    def _attempt(self, action: Callable[[], object]) -> bool:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - shown in words at the input
            self._say(describe_error(exc), error=True)
            return False
        return True
