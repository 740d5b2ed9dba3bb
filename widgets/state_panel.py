"""State: the narrative state where the story is being read, and a form to
correct it. A correction is one typed event (the same vocabulary the
narrator uses), applied with `camp.correct`; the reader's word outranks the
story's, and a refused event comes back with the reason."""
from __future__ import annotations

import json
import threading

import ipywidgets as w

from engine import Campaign, html
from engine.html import Html
from engine.narrative.events import LABELS, SPECS, fields_of

from .common import Message
from .runner import describe_error

__all__ = ["StatePanel", "event_from_form"]

_HINTS = {"key": "a short key, e.g. silver-key", "text": "words", "value": "a word, number or true/false",
          "labels": "keys separated by commas"}


def event_from_form(event_type: str, values: dict[str, str]) -> dict:
    """The event the form describes: blank fields left out, lists split on commas,
    true/false and plain numbers in a value field read as such."""
    kinds = fields_of(event_type)
    event: dict = {"type": event_type}
    for name, raw in values.items():
        text = (raw or "").strip()
        if not text:
            continue
        if kinds[name] == LABELS:
            event[name] = [part.strip() for part in text.split(",") if part.strip()]
        elif kinds[name] == "value":
            event[name] = _plain_value(text)
        else:
            event[name] = text
    return event


def _plain_value(text: str):
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


class StatePanel(w.VBox):
    def __init__(self, camp: Campaign):
        self.camp = camp
        self.body = w.HTML()
        self.kind = w.Dropdown(description="Correct", options=[(f"{name} — {spec['summary']}", name)
                                                              for name, spec in SPECS.items()],
                               value="add_fact", layout=w.Layout(width="100%", max_width="40em"))
        self.form = w.VBox()
        self.fields: dict[str, w.Text] = {}
        self.note = w.Text(description="Note", placeholder="why (kept in the audit list)",
                           layout=w.Layout(width="100%", max_width="40em"))
        self.apply = w.Button(description="Apply correction", button_style="primary", layout=w.Layout(width="auto"))
        self.refresh_button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
        self.message = Message()
        self._lock = threading.Lock()
        super().__init__([self.body, self.kind, self.form, self.note,
                          w.HBox([self.apply, self.refresh_button]), self.message])
        self.kind.observe(lambda _: self._build_form(), "value")
        self.apply.on_click(lambda _: self.correct())
        self.refresh_button.on_click(lambda _: self.refresh())
        self._build_form()
        self.refresh()

    def _build_form(self) -> None:
        spec = SPECS[self.kind.value]
        self.fields = {}
        for name, kind in fields_of(self.kind.value).items():
            required = name in spec["required"]
            self.fields[name] = w.Text(description=name, placeholder=_HINTS.get(kind, "") + ("" if required else
                                                                                             " (optional)"),
                                       style={"description_width": "8em"},
                                       layout=w.Layout(width="100%", max_width="40em"))
        self.form.children = tuple(self.fields.values())

    def correct(self) -> None:
        event = event_from_form(self.kind.value, {k: f.value for k, f in self.fields.items()})
        try:
            result = self.camp.correct(event, note=self.note.value.strip())
        except Exception as exc:  # noqa: BLE001 - the refusal says which field and why
            self.message.say(describe_error(exc), error=True)
            return
        self.message.say(result.message, error=bool(result.refused))
        for field in self.fields.values():
            field.value = ""
        self.note.value = ""
        self.refresh()

    def refresh(self) -> None:
        with self._lock:
            try:
                state = self.camp.state
            except Exception as exc:  # noqa: BLE001 - shown in place
                self.body.value = html.tag("p", describe_error(exc), style="color:#b00020")
                return
            self.body.value = (_listing(state) if state else
                               html.tag("p", "No narrative state recorded at this point of the story yet. "
                                        "Corrections below start it.", style="color:#888"))


def _listing(value) -> Html:
    """Nested dicts and lists as nested HTML lists; every key and value escaped."""
    if isinstance(value, dict):
        items = Html("").join(html.fragment("<li>{}: {}</li>", html.tag("b", str(k)), _listing(v))
                              for k, v in value.items())
        return html.tag("ul", items, style="margin:.2em 0")
    if isinstance(value, list | tuple):
        items = Html("").join(html.tag("li", _listing(v)) for v in value)
        return html.tag("ul", items, style="margin:.2em 0") if value else html.tag("i", "none")
    if isinstance(value, str):
        return html.text(value)
    return html.text(json.dumps(value, default=str))
