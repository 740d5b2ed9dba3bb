"""State: the narrative state where the story is being read, as a player
reads it (the scene, who is where, what each one carries, what is known,
open threads), and behind "Correct…" a form to change it. A correction is
one typed event (the same vocabulary the narrator uses), applied with
`camp.correct`; the reader's word outranks the story's, and a refused event
comes back with the reason."""
from __future__ import annotations

import json
import threading

import ipywidgets as w

from engine import Campaign, html
from engine.html import Html
from engine.narrative.events import LABELS, SPECS, fields_of
from engine.narrative.from_prose import sketch

from .common import Message
from .runner import describe_error

__all__ = ["StatePanel", "event_from_form", "prose_html", "state_html"]

NOTHING_RECORDED = ("Nothing recorded yet at this point of the story: the narrator's state events (or your "
                    "corrections, under Correct…) fill this in.")

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
        self.body.add_class("sw-state")
        self.kind = w.Dropdown(description="Change", options=[(f"{name} — {spec['summary']}", name)
                                                             for name, spec in SPECS.items()],
                               value="add_fact", layout=w.Layout(width="100%", max_width="40em"))
        self.form = w.VBox()
        self.fields: dict[str, w.Text] = {}
        self.note = w.Text(description="Note", placeholder="why (kept in the audit list)",
                           layout=w.Layout(width="100%", max_width="40em"))
        self.apply = w.Button(description="Apply correction", button_style="primary", layout=w.Layout(width="auto"))
        self.refresh_button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
        self.open_form = w.ToggleButton(description="Correct…", layout=w.Layout(width="auto"),
                                        tooltip="Change the state by hand: the narrator's events, typed by you.")
        self.message = Message()
        self._lock = threading.Lock()
        self.correction = w.VBox([self.kind, self.form, self.note, self.apply])
        self.correction.layout.display = "none"
        self.correction.add_class("sw-correction")
        super().__init__([self.body, w.HBox([self.open_form, self.refresh_button]), self.correction, self.message])
        self.kind.observe(lambda _: self._build_form(), "value")
        self.apply.on_click(lambda _: self.correct())
        self.refresh_button.on_click(lambda _: self.refresh())
        self.open_form.observe(lambda change: self._show_form(change["new"]), "value")
        self._build_form()
        self.refresh()

    def _show_form(self, shown: bool) -> None:
        self.correction.layout.display = "" if shown else "none"

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
            if _recorded(state):
                self.body.value = state_html(state)
                return
            self.body.value = self._from_prose()

    def _from_prose(self) -> Html:
        """With no state recorded: what the story's own words name, and why
        that is all there is (never the state itself)."""
        try:
            entries = self.camp.history()
            protocol = bool(getattr(getattr(self.camp.workbench, "settings", None), "state_protocol", True))
        except Exception as exc:  # noqa: BLE001 - shown in place
            return html.tag("p", describe_error(exc), style="color:#b00020")
        narrations = [e.text for e in entries if e.kind in ("narrator", "start")]
        if not any(e.kind == "narrator" for e in entries):
            return html.tag("p", NOTHING_RECORDED, style="color:#888")
        why = ("Narrative state is off in Settings, so the narrator is not asked for state events." if not protocol
               else "The narrator has written no state events (a small model such as the embedded 135M one does "
                    "not follow the state protocol).")
        return prose_html(sketch(narrations, [getattr(self.camp, "protagonist", "")]), why)


def _recorded(state) -> bool:
    """Whether the state holds anything a player would read."""
    return isinstance(state, dict) and any(state.get(k) for k in ("entities", "scene", "facts", "relationships",
                                                                    "threads", "possessions"))


def prose_html(found, why: str) -> Html:
    """A sketch of the story's own words (engine.narrative.from_prose), said
    to be that and not the state; every name escaped."""
    note = html.tag("p", f"{why} So this is read from the story's own words — who, where and what it names, "
                         "with how often — not the state: Correct… records any of it as state.",
                    style="color:#666;margin:.2em 0 .4em 0;line-height:1.4")
    if found.empty:
        return note + html.tag("p", "The story has not named anyone or anything yet.", style="color:#888")
    rows = [(title, ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in items))
            for title, items in (("People", found.people), ("Places", found.places), ("Things", found.things))
            if items]
    return note + Html("").join(html.tag("div", html.tag("b", title, style="color:#555") + html.tag("div", words),
                                         cls=f"sw-prose-{title.lower()}", style="margin:.2em 0 .5em 0")
                                for title, words in rows)


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


def state_html(state: dict) -> Html:
    """The state in a player's words: the scene, who is where and carries
    what, what is known, open threads; every name and value escaped."""
    state = state if isinstance(state, dict) else {}
    entities = state.get("entities") if isinstance(state.get("entities"), dict) else {}

    def name(key) -> str:
        entity = entities.get(key)
        return str(entity.get("name") or key) if isinstance(entity, dict) else str(key)

    sections = []
    scene = state.get("scene") if isinstance(state.get("scene"), dict) else {}
    if scene.get("summary") or scene.get("location"):
        where = f" at {name(scene['location'])}" if scene.get("location") else ""
        present = [name(k) for k in scene.get("present") or []]
        here = f" Present: {', '.join(present)}." if present else ""
        sections.append(("Now", html.text(f"{scene.get('summary') or ''}{where}.{here}".strip(" ."))))
    carried: dict[str, list[str]] = {}
    for item, owner in (state.get("possessions") or {}).items():
        carried.setdefault(str(owner), []).append(name(item))
    people = []
    for key, entity in entities.items():
        if not isinstance(entity, dict) or entity.get("type") in ("place", "item"):
            continue
        bits = [f"at {name(entity['location'])}"] if entity.get("location") else []
        if carried.get(key):
            bits.append("carries " + ", ".join(carried[key]))
        if entity.get("status") not in (None, "", "active"):
            bits.append(str(entity["status"]))
        line = html.tag("b", name(key)) + (html.text(" — " + "; ".join(bits)) if bits else "")
        if entity.get("description"):
            line += html.tag("span", f" ({entity['description']})", style="color:#666")
        people.append(line)
    if people:
        sections.append(("Who", _items(people)))
    places = [name(k) for k, e in entities.items() if isinstance(e, dict) and e.get("type") == "place"]
    if places:
        sections.append(("Places", html.text(", ".join(places))))
    loose = [name(k) for k, e in entities.items() if isinstance(e, dict) and e.get("type") == "item"
             and k not in (state.get("possessions") or {})]
    if loose:
        sections.append(("Things nobody carries", html.text(", ".join(loose))))
    facts = [f for f in state.get("facts") or [] if isinstance(f, dict) and f.get("status", "active") == "active"]
    if facts:
        sections.append(("Known", _items([html.text(_fact(f, name)) for f in facts])))
    ties = [r for r in state.get("relationships") or [] if isinstance(r, dict) and r.get("status", "active") == "active"]
    if ties:
        sections.append(("Ties", _items([html.text(f"{name(r.get('source'))} {r.get('label', '')} "
                                                   f"{name(r.get('target'))}") for r in ties])))
    threads = [t for t in (state.get("threads") or {}).values() if isinstance(t, dict) and t.get("status") == "open"]
    if threads:
        sections.append(("Open threads", _items([html.text(str(t.get("title", ""))) for t in threads])))
    if not sections:
        return html.tag("p", NOTHING_RECORDED, style="color:#888")
    return Html("").join(html.tag("div", html.tag("b", title, style="color:#555") + html.tag("div", body),
                                  style="margin:.2em 0 .5em 0") for title, body in sections)


def _items(lines) -> Html:
    return html.tag("ul", Html("").join(html.tag("li", line) for line in lines), style="margin:.1em 0")


def _fact(fact: dict, name) -> str:
    words = [name(fact["subject"])] if fact.get("subject") else []
    words.append(str(fact.get("predicate", "")))
    if fact.get("object"):
        words.append(name(fact["object"]))
    if "value" in fact and fact["value"] not in (None, ""):
        words.append(f"= {fact['value']}")
    return " ".join(words)
