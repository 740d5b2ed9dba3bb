"""Views of the campaign that stay in step with the app, for the cells below it.

A cell run once shows what was true when it ran: after Run All, "the story so
far" below the app would show only the opening, forever. A `LiveView` is
re-read by the app after every story change (`app.follow(view)`), and where
widgets do not render (a saved or exported notebook) it shows as the HTML of
the moment it was saved, so it is never stale in the browser and never empty
on disk.

    app.transcript()               # the story so far, kept current
    app.records_view(["turn", ...])  # one row per turn, kept current
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import ipywidgets as w

from engine import html
from engine.html import Html

from .runner import describe_error

__all__ = ["LiveView", "PLAY_RECORD_COLUMNS", "PLAY_DATABASE_ENV", "play_database"]

PLAY_DATABASE_ENV = "STORY_WORKBENCH_PLAY_DB"
# The columns of "one row per turn" in the play notebook.
PLAY_RECORD_COLUMNS = ["turn", "mode", "input", "words", "estimate_tokens", "prompt_tokens", "completion_tokens",
                       "generate_ms"]


def play_database() -> str:
    """Where `make play` keeps its campaign: $STORY_WORKBENCH_PLAY_DB, else
    $XDG_DATA_HOME/story-workbench/play.db (~/.local/share/... by default):
    outside the project, so the file browser and git never see it."""
    import os
    from pathlib import Path

    chosen = os.environ.get(PLAY_DATABASE_ENV)
    if chosen:
        return str(Path(chosen).expanduser())
    home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    folder = home / "story-workbench"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / "play.db")


class LiveView:
    """`render()` returns the HTML to show; `refresh()` re-reads it into the widget."""

    def __init__(self, render: Callable[[], Html], css_class: str = ""):
        self._render = render
        self.widget = w.HTML()
        if css_class:
            self.widget.add_class(css_class)
        self._lock = threading.Lock()
        self.refresh()

    def html(self) -> Html:
        try:
            return self._render()
        except Exception as exc:  # noqa: BLE001 - shown in place
            return html.tag("p", describe_error(exc), style="color:#b00020")

    def refresh(self) -> None:
        with self._lock:
            self.widget.value = self.html()

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        """The live widget where widgets render, the HTML of this moment everywhere else."""
        widget_bundle = getattr(self.widget, "_repr_mimebundle_", None)
        bundle = dict(widget_bundle(**kwargs) or {}) if callable(widget_bundle) else {}
        bundle["text/html"] = self.html()
        bundle["text/plain"] = "<live view of the campaign>"
        return bundle
