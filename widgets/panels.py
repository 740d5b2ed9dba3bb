"""The side panels and the seam other work plugs into.

A panel is `(title, factory)`: `factory(camp)` returns a widget. If that
widget has a `refresh()` method the app calls it after every story change
(a turn, undo, a take switch, a restore); if it has `attach(app)` the app
calls it once, so a panel can run slow work through the app's runner. A
panel that fails to build shows its error in place and the app still opens.

Settings, Lore, Context, State, Memory and Knowledge ship here; `placeholder_panel`
lists any other campaign attribute until it has a panel of its own.
"""
from __future__ import annotations

from collections.abc import Callable

import ipywidgets as w

from engine import Campaign, html

from .inspector import ContextInspector
from .knowledge_panel import KnowledgePanel
from .lore_panel import LorePanel
from .memory_panel import MemoryPanel
from .runner import describe_error
from .settings_panel import SettingsPanel
from .state_panel import StatePanel, _listing

__all__ = ["PANELS", "Factory", "StatePanel", "build_panels", "placeholder_panel", "register_panel"]

Factory = Callable[[Campaign], w.Widget]


def _refresh_button(panel) -> w.Button:
    """Derived work (memories, state) can finish after the turn that caused it;
    a button re-reads without waiting for the next story change."""
    button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
    button.on_click(lambda _: panel.refresh())
    return button


class _AttributePanel(w.VBox):
    """Shows `camp.<attribute>` plainly until a real panel is registered: its
    rows (a `frame()` or `list()` DataFrame, or any iterable; the first 50),
    or a note that it exists but has no panel yet."""

    def __init__(self, camp: Campaign, attribute: str, what: str):
        self.camp, self.attribute, self.what = camp, attribute, what
        self.body = w.HTML()
        super().__init__([self.body, _refresh_button(self)])
        self.refresh()

    def refresh(self) -> None:
        if not hasattr(self.camp, self.attribute):
            self.body.value = html.tag("p", f"{self.what} is not available yet.", style="color:#888")
            return
        try:
            items = _rows(getattr(self.camp, self.attribute))
        except Exception as exc:  # noqa: BLE001 - shown in place
            self.body.value = html.tag("p", describe_error(exc), style="color:#b00020")
            return
        if items is None:
            self.body.value = html.fragment("<p style='color:#888'>{} is available as {}; its panel is not registered "
                                            "yet.</p>", self.what, html.tag("code", f"camp.{self.attribute}"))
        else:
            self.body.value = (_listing([_item(i) for i in items]) if items
                               else html.tag("p", f"No {self.what.lower()} yet.", style="color:#888"))


def _rows(value) -> list | None:
    """Up to 50 rows of whatever the campaign offers, or None if it cannot be listed."""
    value = value() if callable(value) else value
    for method in ("frame", "list"):
        table = getattr(value, method, None)
        if callable(table) and not isinstance(value, list | tuple | dict):
            value = table()
            break
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame
        return value.head(50).to_dict("records")
    if isinstance(value, str | dict):
        return [value]
    try:
        return list(value)[:50]
    except TypeError:
        return None


def _item(item):
    """A record shows as its text (or name); anything else as it is."""
    if isinstance(item, dict):
        for key in ("text", "name", "title"):
            if key in item:
                return str(item[key]) + (" (pinned)" if item.get("pinned") else "")
        return item
    return item if isinstance(item, list | tuple | str) else str(item)


def placeholder_panel(attribute: str, what: str) -> Factory:
    """A factory for a panel that lists `camp.<attribute>`, or says it is not available yet."""
    return lambda camp: _AttributePanel(camp, attribute, what)


PANELS: list[tuple[str, Factory]] = [
    ("Settings", SettingsPanel),
    ("Lore", LorePanel),
    ("Context", ContextInspector),
    ("State", StatePanel),
    ("Memory", MemoryPanel),
    ("Knowledge", KnowledgePanel),
]


def register_panel(title: str, factory: Factory, panels: list | None = None) -> None:
    """Add a panel, or replace the one with the same title (apps opened afterwards get it)."""
    panels = PANELS if panels is None else panels
    for i, (existing, _) in enumerate(panels):
        if existing == title:
            panels[i] = (title, factory)
            return
    panels.append((title, factory))


def build_panels(camp: Campaign, panels) -> tuple[w.Accordion, list[w.Widget]]:
    """One collapsed Accordion section per panel (the story stays in view until
    one is opened); a factory that raises becomes a section showing its error."""
    built = []
    for title, factory in panels:
        try:
            built.append(factory(camp))
        except Exception as exc:  # noqa: BLE001 - one broken panel must not break the app
            built.append(w.HTML(html.tag("p", f"The {title} panel could not open: {describe_error(exc)}",
                                         style="color:#b00020")))
    for (title, _), widget in zip(panels, built, strict=True):
        widget.add_class(f"sw-panel-{title.lower()}")  # a stable handle for the browser test and for CSS
    box = w.Accordion(children=built, titles=[t for t, _ in panels], selected_index=None)
    return box, built
