"""Settings: which narrator, where, which model, how big a prompt; and a
Test connection button that answers in words before a turn has to.

Only fields the reader changed are sent to `Workbench.configure`, so opening
the panel never replaces a narrator object configured in code (a test
narrator, say) with the saved "local" setting.
"""
from __future__ import annotations

from html import escape

import ipywidgets as w

from engine import Campaign

from .runner import Runner, describe_error

__all__ = ["SettingsPanel"]

NARRATORS = [("Embedded (SmolLM2, offline)", "local"), ("My server (OpenAI-compatible)", "endpoint")]


class SettingsPanel(w.VBox):
    def __init__(self, camp: Campaign):
        self.workbench = camp.workbench
        self.narrator = w.Dropdown(options=NARRATORS, description="Narrator")
        self.endpoint = w.Text(description="Endpoint", placeholder="http://127.0.0.1:11434/v1")
        self.model = w.Text(description="Model", placeholder="qwen2.5:7b")
        self.budget = w.BoundedIntText(description="Budget", min=256, max=1_000_000, step=1024,
                                       tooltip="Tokens the narrator is given, prompt plus reply.")
        self.apply = w.Button(description="Apply", button_style="primary")
        self.test = w.Button(description="Test connection")
        self.message = w.HTML()
        self.report = w.HTML()
        self._background = Runner(threaded=True).start
        self.apply.on_click(lambda _: self.save())
        self.test.on_click(lambda _: self.test_connection())
        super().__init__([self.narrator, self.endpoint, self.model, self.budget,
                          w.HBox([self.apply, self.test]), self.message, self.report])
        self.refresh()

    def attach(self, app) -> None:
        """Run connection tests through the app, one job at a time with turns."""
        self._background = app.background

    def refresh(self) -> None:
        s = self.workbench.settings
        self.narrator.value = s.narrator
        self.endpoint.value = s.endpoint_url
        self.model.value = s.model
        self.budget.value = s.context_budget

    def changes(self) -> dict:
        s = self.workbench.settings
        wanted = {"narrator": self.narrator.value, "endpoint_url": self.endpoint.value.strip(),
                  "model": self.model.value.strip(), "context_budget": int(self.budget.value)}
        return {k: v for k, v in wanted.items() if v != getattr(s, k)}

    def save(self) -> None:
        changes = self.changes()
        if not changes:
            self._say("Nothing to change.")
            return
        try:
            self.workbench.configure(**changes)
        except Exception as exc:  # noqa: BLE001 - the refusal, in words
            self._say(describe_error(exc), error=True)
            return
        self._say("Saved: " + ", ".join(sorted(changes)) + ".")

    def test_connection(self) -> None:
        """Probe in the background: an unreachable server can take seconds to time out."""
        self.report.value = "<p style='color:#555'>Testing the connection…</p>"
        self.test.disabled = True

        def done(report) -> None:
            self.report.value = report._repr_html_()

        def failed(exc) -> None:
            self.report.value = ""
            self._say(describe_error(exc), error=True)

        def after() -> None:
            self.test.disabled = False

        if not self._background(self.workbench.test_connection, done, failed, after):
            self.test.disabled = False
            self.report.value = ""
            self._say("A turn is running: test the connection when it has finished.", error=True)

    def _say(self, text: str, error: bool = False) -> None:
        colour = "#b00020" if error else "#555"
        self.message.value = f"<p style='color:{colour}'>{escape(text)}</p>"
