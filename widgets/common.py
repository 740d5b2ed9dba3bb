"""Small pieces the panels share: a message line, a two-step confirmation,
and a table of rows with every cell escaped."""
from __future__ import annotations

from collections.abc import Callable, Iterable

import ipywidgets as w

from engine import html
from engine.html import Html

from .runner import describe_error

__all__ = ["CELL", "TABLE_FRAME", "Confirm", "Message", "attempt", "table_html"]


class Message(w.HTML):
    """One line that says what happened; errors in red, always escaped."""

    def say(self, text: str, error: bool = False) -> None:
        if not text:
            self.value = ""
            return
        colour, role = ("#b00020", "alert") if error else ("#555", "status")
        self.value = html.tag("p", text, role=role, style=f"color:{colour};margin:.2em 0;line-height:1.4")


def attempt(action: Callable[[], object], message: Message, done: str = "") -> bool:
    """Run one quick engine call; its refusal shows in words, never as a traceback."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - shown in place
        message.say(describe_error(exc), error=True)
        return False
    message.say(done)
    return True


class Confirm(w.HBox):
    """Delete-style actions take two clicks: the question, then "Yes"."""

    def __init__(self, yes: str = "Yes, delete"):
        self.question = w.HTML()
        self.yes = w.Button(description=yes, button_style="danger", layout=w.Layout(width="auto"))
        self.no = w.Button(description="Cancel", layout=w.Layout(width="auto"))
        self._then: Callable[[], None] | None = None
        super().__init__([self.question, self.yes, self.no])
        self.layout.display = "none"
        self.yes.on_click(lambda _: self._answer(True))
        self.no.on_click(lambda _: self._answer(False))

    def ask(self, question: str, then: Callable[[], None]) -> None:
        self.question.value = html.tag("span", question, style="padding-right:.6em")
        self._then = then
        self.layout.display = ""

    def _answer(self, yes: bool) -> None:
        then, self._then = self._then, None
        self.layout.display = "none"
        if yes and then is not None:
            then()


# Cells wrap between words only: "anywhere" let a narrow table split "Mara"
# into "Mar/a". A table wider than its box scrolls sideways in its own frame.
CELL = "padding-right:1em;vertical-align:top;word-break:normal;overflow-wrap:normal;hyphens:manual"
TABLE_FRAME = "max-width:100%;overflow-x:auto"


def table_html(columns: Iterable[str], rows: Iterable[Iterable[object]], css_class: str = "") -> Html:
    """A plain table; every header and cell escaped, so imported titles stay text."""
    head = html.tag("tr", Html("").join(
        html.tag("th", str(c), style=f"text-align:left;{CELL}") for c in columns))
    body = Html("").join(
        html.tag("tr", Html("").join(html.tag("td", str(v), style=CELL) for v in row))
        for row in rows)
    return html.tag("div", html.tag("table", html.tag("thead", head) + html.tag("tbody", body), cls=css_class,
                                    style="word-break:normal"), style=TABLE_FRAME)
