"""Settings: the narrator and where it runs, how long a reply may be, how
hot, how big a prompt, the embedder, memory and the state protocol; and a
Test connection button that answers in words before a turn has to.

Only fields the reader changed are sent to `Workbench.configure`, so opening
the panel never replaces a narrator object configured in code (a test
narrator, say) with the saved "local" setting.
"""
from __future__ import annotations

import ipywidgets as w

from engine import Campaign, html
from engine.html import Html

from .common import Message
from .runner import Runner, describe_error

__all__ = ["SettingsPanel", "connection_html"]

NARRATORS = [("Embedded (SmolLM2, offline)", "local"), ("My server (OpenAI-compatible)", "endpoint")]
EMBEDDERS = [("Embedded MiniLM (offline)", "local"), ("My server's embedding model", "endpoint"),
             ("A GGUF embedding model", "gguf"), ("None (word search only)", "none")]


def _field(kind, description: str, tooltip: str = "", **options) -> w.Widget:
    """One labelled control; labels get a fixed column so the inputs line up."""
    return kind(description=description, tooltip=tooltip, **options,
                layout=w.Layout(width="100%", max_width="34em"), style={"description_width": "10em"})


class SettingsPanel(w.VBox):
    """`controls` maps each setting's name to its control, in the panel's order."""

    def __init__(self, camp: Campaign):
        self.workbench = camp.workbench
        self.controls: dict[str, w.Widget] = {
            "narrator": _field(w.Dropdown, "Narrator", options=NARRATORS),
            "endpoint_url": _field(w.Text, "Endpoint", placeholder="http://127.0.0.1:11434/v1"),
            "model": _field(w.Text, "Model", placeholder="qwen2.5:7b"),
            "max_output_tokens": _field(w.BoundedIntText, "Reply length", "The longest reply, in tokens.",
                                        min=16, max=32_768, step=50),
            "temperature": _field(w.BoundedFloatText, "Temperature", "0 is most predictable; 2 is wild.",
                                  min=0.0, max=2.0, step=0.1),
            "context_budget": _field(w.BoundedIntText, "Budget", "Tokens the narrator is given, prompt plus "
                                     "reply; a smaller window on the model caps it.", min=256, max=1_000_000,
                                     step=1024),
            "trim_fraction": _field(w.BoundedIntText, "Trim fraction", "History is trimmed in blocks of "
                                    "1/this of the window, which keeps the prompt cache warm; 0 slides by one.",
                                    min=0, max=64),
            "embedder": _field(w.Dropdown, "Embedder", options=EMBEDDERS),
            "embedding_model": _field(w.Text, "Embedding model", placeholder="nomic-embed-text (for My server)"),
            "embedding_model_path": _field(w.Text, "Embedding GGUF", placeholder="~/models/nomic-embed-text.gguf"),
            "memory_enabled": w.Checkbox(description="Memory: write and recall memories", indent=False),
            "state_protocol": w.Checkbox(description="Narrative state: ask the narrator for state events",
                                         indent=False),
        }
        for name, control in self.controls.items():
            control.add_class(f"sw-setting-{name}")
        self.apply = w.Button(description="Apply", button_style="primary")
        self.test = w.Button(description="Test connection")
        self.message = Message()
        self.report = w.HTML()
        self._background = Runner(threaded=True).start
        self.apply.on_click(lambda _: self.save())
        self.test.on_click(lambda _: self.test_connection())
        self.controls["narrator"].observe(lambda _: self._show_relevant(), "value")
        self.controls["embedder"].observe(lambda _: self._show_relevant(), "value")
        super().__init__([*self.controls.values(), w.HBox([self.apply, self.test]), self.message, self.report])
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
            control.value = getattr(s, name)
        self._show_relevant()

    def _show_relevant(self) -> None:
        """The endpoint fields only when something uses the endpoint."""
        narrator, embedder = self.controls["narrator"].value, self.controls["embedder"].value
        shown = {"endpoint_url": "endpoint" in (narrator, embedder), "model": narrator == "endpoint",
                 "embedding_model": embedder == "endpoint", "embedding_model_path": embedder == "gguf"}
        for name, show in shown.items():
            self.controls[name].layout.display = "" if show else "none"

    def changes(self) -> dict:
        s = self.workbench.settings
        wanted = {name: (c.value.strip() if isinstance(c.value, str) else c.value) for name, c in self.controls.items()}
        return {k: v for k, v in wanted.items() if v != getattr(s, k)}

    def save(self) -> None:
        """Apply what changed; an old connection report no longer describes it, so it goes."""
        changes = self.changes()
        if not changes:
            self.message.say("Nothing to change.")
            return
        try:
            self.workbench.configure(**changes)
        except Exception as exc:  # noqa: BLE001 - the refusal, in words
            self.message.say(describe_error(exc), error=True)
            return
        self.report.value = ""
        self.message.say("Saved: " + ", ".join(sorted(changes)) + ". Test the connection to check it.")

    def test_connection(self) -> None:
        """Probe in the background: an unreachable server can take seconds to time out."""
        self.report.value = html.tag("p", "Testing the connection…", style="color:#555")
        self.message.say("")
        self.test.disabled = True

        def done(report) -> None:
            self.report.value = connection_html(report)

        def failed(exc) -> None:
            self.report.value = ""
            self.message.say(describe_error(exc), error=True)

        def after() -> None:
            self.test.disabled = False

        if not self._background(self.workbench.test_connection, done, failed, after):
            self.test.disabled = False
            self.report.value = ""
            self.message.say("A turn is running: test the connection when it has finished.", error=True)


def connection_html(report) -> Html:
    """The connection report, with one change of tone: a verified window smaller
    than the budget is how every small local model runs (prompts are built to
    the window), so it is a note, not an orange warning."""
    if not report.warning:
        return report._repr_html_()
    window = report.window or {}
    routine = bool(window.get("verified")) and report.reachable and (window.get("tokens") or 0) < report.budget
    if not routine:
        return report._repr_html_()
    plain = type(report)(**{**report.__dict__, "warning": None})._repr_html_()
    note = html.tag("p", f"Note: {report.warning} That is expected for this model; lower the budget to the window "
                         "to make it explicit.", cls="sw-note", style="color:#555")
    return plain + note
