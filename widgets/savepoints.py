"""Save points: make one with a name, pick one, restore it, delete it.

Deleting cannot be undone, so it takes two clicks: Delete asks, and only
"Yes, delete" deletes. Restoring moves the head like Undo does (nothing is
lost), so it happens at once.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import ipywidgets as w

from engine import Campaign, html

from .runner import describe_error

__all__ = ["SavePointsBar"]

TIPS = {"create": "Remember this place in the story.", "restore": "Go back to the chosen save point.",
        "delete": "Delete the chosen save point (asks first)."}
WHY_NOT = {"create": "Type a name for the save point first.", "restore": "No save point to restore yet.",
           "delete": "No save point to delete yet."}
BUSY = "A turn is being narrated: wait for it, or press Stop."
EDITING = "Finish or cancel the edit first."


class SavePointsBar:
    """`changed()` is called after a restore (the story moved); `say(msg, error)` shows messages."""

    def __init__(self, camp: Campaign, changed: Callable[[], None], say: Callable[..., None]):
        self.camp, self._changed, self._say = camp, changed, say
        self.name = w.Text(placeholder="Name, e.g. before the crypt", layout=w.Layout(width="16em"))
        self.create = w.Button(description="Save point", tooltip=TIPS["create"])
        # Wide enough for a name and "· saved 01 Dec 22:54" whole (18em cut the minutes).
        self.choice = w.Dropdown(options=[], layout=w.Layout(width="auto", min_width="24em", max_width="100%"))
        self._refreshing = threading.Lock()
        self.restore = w.Button(description="Restore", tooltip=TIPS["restore"])
        self.delete = w.Button(description="Delete…", tooltip=TIPS["delete"])
        self.confirm_text = w.HTML()
        self.confirm = w.Button(description="Yes, delete", button_style="danger")
        self.cancel = w.Button(description="Cancel")
        self.confirm_row = w.HBox([self.confirm_text, self.confirm, self.cancel])
        self.confirm_row.layout.display = "none"
        row = w.HBox([self.name, self.create, self.choice, self.restore, self.delete],
                     layout=w.Layout(flex_flow="row wrap"))
        self.widget = w.VBox([row, self.confirm_row])
        self.widget.add_class("sw-savepoints")
        self.create.on_click(lambda _: self.save())
        self.restore.on_click(lambda _: self.go_back())
        self.delete.on_click(lambda _: self.ask_delete())
        self.confirm.on_click(lambda _: self.really_delete())
        self.cancel.on_click(lambda _: self._hide_confirm())
        self.name.observe(lambda _: self._enable(), "value")
        self.choice.observe(lambda _: self._hide_confirm(), "value")
        self._busy = False
        self._editing = False
        self.refresh()

    # ------------------------------------------------------------ actions
    def save(self) -> None:
        if self._attempt(lambda: self.camp.save_point(self.name.value)):
            self._say(f"Save point “{self.name.value.strip()}” made: pick it in the list and Restore to come "
                      "back here.")
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
        self.confirm_text.value = html.fragment("Delete save point {}? This cannot be undone.",
                                                html.tag("b", self.choice.label))
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
        self.choice.options = [(_label(p), p.id) for p in reversed(points)]
        ids = [p.id for p in points]
        self.choice.value = current if current in ids else (ids[-1] if ids else None)
        self._enable()

    def set_busy(self, busy: bool, editing: bool = False) -> None:
        """A running turn or an open edit holds every story move, save points included."""
        self._busy, self._editing = busy, editing
        if busy or editing:
            self._hide_confirm()
        self._enable()

    def _enable(self) -> None:
        chosen = self.choice.value is not None
        held = BUSY if self._busy else (EDITING if self._editing else None)
        self._set(self.create, "create", bool(self.name.value.strip()), held)
        self._set(self.restore, "restore", chosen, held)
        self._set(self.delete, "delete", chosen, held)
        self.choice.disabled = not chosen
        self.name.disabled = self._busy

    @staticmethod
    def _set(button: w.Button, key: str, applies: bool, held: str | None) -> None:
        """Enabled when it applies and nothing holds it; otherwise the tooltip says why."""
        button.disabled = held is not None or not applies
        button.tooltip = held or (TIPS[key] if applies else WHY_NOT[key])

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


def _label(point) -> str:
    """Name and when it was saved: a player knows their own clock, not the tree's depth."""
    when = point.created_at.strftime("%d %b %H:%M") if point.created_at else ""
    return f"{point.name} · saved {when}" if when else point.name
