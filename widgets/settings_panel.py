"""Settings: the narrator and where it runs, how long a reply may be, how
hot, how big a prompt, the embedder, memory and the state protocol; and a
Test connection button that answers in words before a turn has to.

Every control is built from the settings' own declaration
(`engine.settings.SPECS`): its label, help, bounds and choices, and the
narrator it belongs to. Nothing here repeats a bound: a setting declared
with `panel=True` appears here by itself.

Only fields the reader changed, and that the chosen narrator and embedder
use, are sent to `Workbench.configure`: a value left in a hidden field never
blocks Apply, and opening the panel never replaces a narrator object
configured in code (a test narrator, say) with the saved "local" setting.
A number outside its bounds is brought inside them, and the message says so.
"""
from __future__ import annotations

import ipywidgets as w

from engine import Campaign, html
from engine.html import Html
from engine.settings import SAMPLERS, SPECS, Spec, propose

from .common import Message
from .runner import Runner, describe_error

__all__ = ["SettingsPanel", "adjust", "connection_html", "panel_settings"]


def panel_settings() -> list[str]:
    """The settings the panel shows, in the order they are declared."""
    return [name for name, spec in SPECS.items() if spec.panel]


def _control(name: str, spec: Spec, kind: str) -> w.Widget:
    """One labelled control from its declaration; labels get a fixed column so the inputs line up."""
    # No side margins: ipywidgets' default 2 px beside a 100% width scrolled the panel sideways at 900 px.
    common = dict(tooltip=spec.tooltip(name), layout=w.Layout(width="100%", max_width="34em", margin="2px 0"))
    labelled = dict(description=spec.label, style={"description_width": "10em"}, **common)
    if _optional(name) and kind in ("int", "float"):  # empty is a value: "not set, the narrator's own"
        return w.Text(placeholder=spec.placeholder or "not set: the narrator's own", **labelled)
    if spec.choices:
        return w.Dropdown(options=[(words, value) for value, words in spec.choices], **labelled)
    if kind == "bool":  # the help is in the tooltip: a long description would not wrap at 900 px
        return w.Checkbox(description=spec.label, indent=False, **common)
    if kind == "int":
        return w.IntText(step=int(spec.step or 1), **labelled)
    if kind == "float":
        return w.FloatText(step=spec.step or 0.1, **labelled)
    if spec.long:
        return w.Textarea(rows=4, **labelled)
    return w.Text(placeholder=spec.placeholder, **labelled)


def adjust(name: str, value):
    """`value` brought inside the declared bounds, and a sentence when it had to be."""
    spec = SPECS[name]
    if not spec.out_of_bounds(value):
        return value, ""
    used = spec.clamp(value)
    side = "less than the least" if used > value else "more than the most"
    return used, f"{spec.label} {value:g} is {side} it can be ({spec.bounds_words()}): {used:g} was used."


class SettingsPanel(w.VBox):
    """`controls` maps each setting's name to its control, in the panel's order."""

    def __init__(self, camp: Campaign):
        self.workbench = camp.workbench
        kinds = {name: _kind(name) for name in SPECS}
        self.controls: dict[str, w.Widget] = {name: _control(name, SPECS[name], kinds[name])
                                               for name in panel_settings()}
        for name, control in self.controls.items():
            control.add_class(f"sw-setting-{name}")
        self.apply = w.Button(description="Apply", button_style="primary", tooltip="Save the changes above.")
        self.reset_sampling = w.Button(description="Reset samplers", tooltip="Top-p, min-p, repetition penalty "
                                       "and stop strings back to not set: the narrator's own (for the embedded "
                                       "model, the values measured for it).")
        self.reset_sampling.add_class("sw-reset-samplers")
        self.reset_sampling.on_click(lambda _: self.reset_samplers())
        self.test = w.Button(description="Test connection", tooltip="Ask the narrator (and your server) whether "
                             "it answers, and how big its window is.")
        self.note = w.HTML()
        self.note.add_class("sw-settings-note")
        self.message = Message()
        self.report = w.HTML()
        self._background = Runner(threaded=True).start
        self.apply.on_click(lambda _: self.save())
        self.test.on_click(lambda _: self.test_connection())
        for chooser in ("narrator", "embedder"):
            if chooser in self.controls:
                self.controls[chooser].observe(lambda _: self._show_relevant(), "value")
        super().__init__([*self.controls.values(), self.note,
                          w.HBox([self.apply, self.test, self.reset_sampling], layout=w.Layout(flex_flow="row wrap")),
                          self.message, self.report])
        self.refresh()

    # kept as attributes: code and tests reach the common fields by name
    narrator = property(lambda self: self.controls["narrator"])
    endpoint = property(lambda self: self.controls["endpoint_url"])
    model = property(lambda self: self.controls["model"])
    budget = property(lambda self: self.controls["context_budget"])

    def attach(self, app) -> None:
        """Run connection tests through the app, one job at a time with turns."""
        self._background = app.background

    def refresh(self) -> None:
        s = self.workbench.settings
        for name, control in self.controls.items():
            value = getattr(s, name)
            control.value = ("" if value is None else f"{value:g}") if isinstance(control, w.Text) and \
                _optional(name) and _kind(name) in ("int", "float") else value
        self._budget_shown = s.context_budget
        self._show_relevant()

    def _chosen(self):
        """The settings as they would be with the narrator and embedder picked now (unchecked)."""
        picked = {k: self.controls[k].value for k in ("narrator", "embedder") if k in self.controls}
        try:
            return propose(self.workbench.settings, picked)
        except Exception:  # noqa: BLE001 - a choice outside the list: show everything
            return self.workbench.settings

    def _show_relevant(self) -> None:
        """Only the fields the chosen narrator and embedder use."""
        chosen = self._chosen()
        for name, control in self.controls.items():
            control.layout.display = "" if chosen.applies(name) else "none"
        self._follow_budget(chosen)
        self.note.value = _budget_note(chosen, self.workbench.settings)

    def _follow_budget(self, chosen) -> None:
        """While nobody has set a story budget, the field shows the one the
        narrator picked in the list would get (its own window), not the saved
        narrator's; a number the reader typed stays."""
        control = self.controls.get("context_budget")
        if control is None or not self.workbench.settings.follows("context_budget"):
            return
        if control.value == getattr(self, "_budget_shown", control.value):
            control.value = self._budget_shown = chosen.context_budget

    def changes(self) -> dict:
        """What the reader changed, among the fields the chosen narrator and embedder use."""
        s, chosen = self.workbench.settings, self._chosen()
        wanted = {name: _read(name, c.value) for name, c in self.controls.items() if chosen.applies(name)}
        if s.follows("context_budget") and wanted.get("context_budget") == chosen.context_budget:
            wanted.pop("context_budget")  # the budget shown is the one it follows: it keeps following
        return {k: v for k, v in wanted.items() if v != getattr(s, k)}

    def save(self) -> None:
        """Apply what changed, bounds first (with a sentence for each value
        brought inside them), then the rules between settings, in labels; an
        old connection report no longer describes it, so it goes."""
        try:
            changes = self.changes()
        except ValueError as exc:
            self.message.say(f"Not changed: {exc}", error=True)
            return
        if not changes:
            self.message.say("Nothing to change.")
            return
        notes = []
        for name, value in list(changes.items()):
            used, note = adjust(name, value)
            if note:
                changes[name], notes = used, [*notes, note]
                control = self.controls[name]
                control.value = f"{used:g}" if isinstance(control, w.Text) and not isinstance(used, str) else used
        try:
            problems = propose(self.workbench.settings, changes).problems(named=False)
        except Exception as exc:  # noqa: BLE001 - the refusal, in words
            problems = [describe_error(exc)]
        if problems:
            self.message.say("Not changed: " + "; ".join(problems) + ".", error=True)
            return
        try:
            self.workbench.configure(**changes)
        except Exception as exc:  # noqa: BLE001 - the refusal, in words
            self.message.say(describe_error(exc), error=True)
            return
        self.report.value = ""
        self._show_relevant()
        labels = ", ".join(SPECS[name].label for name in changes)
        self.message.say(" ".join([f"Saved: {labels}.", *notes, "Test the connection to check it."]))

    def reset_samplers(self) -> None:
        """Every sampler back to not set: nothing is sent, the narrator keeps its own."""
        try:
            self.workbench.configure(**dict.fromkeys([n for n in SAMPLERS if n != "stop_strings"]), stop_strings="")
        except Exception as exc:  # noqa: BLE001 - the refusal, in words
            self.message.say(describe_error(exc), error=True)
            return
        self.refresh()
        self.message.say("Samplers reset: top-p, min-p, repetition penalty and stop strings are the narrator's own "
                         "again (nothing is sent for them).")

    def test_connection(self) -> None:
        """Probe in the background: an unreachable server can take seconds to time out."""
        self.report.value = html.tag("p", "Testing the connection…", style="color:#555")
        self.message.say("")
        self.test.disabled = True

        def done(report) -> None:
            self.report.value = connection_html(report, self.workbench.settings.follows("context_budget"))

        def failed(exc) -> None:
            self.report.value = ""
            self.message.say(describe_error(exc), error=True)

        def after() -> None:
            self.test.disabled = False

        if not self._background(self.workbench.test_connection, done, failed, after):
            self.test.disabled = False
            self.report.value = ""
            self.message.say("A turn is running: test the connection when it has finished.", error=True)


def _optional(name: str) -> bool:
    from engine.settings import _KINDS

    return _KINDS[name].endswith("| None")


def _read(name: str, value):
    """A control's value as the setting takes it: text trimmed, and a number
    that may be empty read from its text (empty: not set)."""
    if not isinstance(value, str):
        return value
    value = value.strip()
    if not (_optional(name) and _kind(name) in ("int", "float")):
        return value
    if not value:
        return None
    try:
        number = float(value.replace(",", "."))
    except ValueError:
        raise ValueError(f"{SPECS[name].label} must be a number, such as {SPECS[name].low or 0.9:g}, or empty "
                         f"(not set), not {value!r}.") from None
    return int(number) if _kind(name) == "int" and number.is_integer() else number


def _kind(name: str) -> str:
    from engine.settings import _KINDS

    return _KINDS[name].replace(" | None", "")


def _budget_note(chosen, saved) -> Html:
    """Say where the story budget comes from while nobody has set it."""
    if not saved.follows("context_budget"):
        return Html("")
    window = (f"the model window ({chosen.context_budget:,} tokens)" if chosen.narrator == "local" else
              "your server's window (16,384 tokens until the server is asked)")
    return html.tag("p", f"The story budget follows {window} until you set one.",
                    style="color:#555;margin:.2em 0;line-height:1.4")


def connection_html(report, budget_follows: bool = False) -> Html:
    """The connection report, with one change of tone: a verified window smaller
    than the budget is how every small local model runs (prompts are built to
    the window), so it is a note, not an orange warning; and while the budget
    follows the window, it is simply what happens."""
    if not report.warning:
        return report._repr_html_()
    window = report.window or {}
    tokens = window.get("tokens") or 0
    routine = bool(window.get("verified")) and report.reachable and tokens < report.budget
    if not routine:
        return report._repr_html_()
    plain = type(report)(**{**report.__dict__, "warning": None})._repr_html_()
    words = (f"The story budget follows the window: prompts are built to its {tokens:,} tokens."
             if budget_follows else
             f"Note: {report.warning} That is expected for this model; lower the story budget to the window "
             "to make it explicit.")
    return plain + html.tag("p", words, cls="sw-note", style="color:#555")
