"""The story as it is read, and the passage being written.

Finished passages live in one HTML widget and the passage being narrated in
another, so a streamed token appends to a short string instead of re-sending
the whole story to the browser. Every string from the narrator or the reader
goes through `html.escape` (via `engine.display`): markup in a reply shows as
characters and never becomes markup in the page.
"""
from __future__ import annotations

from html import escape

import ipywidgets as w

from engine import display

__all__ = ["StoryView"]

# A very long story is still one click away in the transcript; the live view
# shows its end so a turn never sends megabytes to the browser.
MAX_ENTRIES = 300

_BOX = "max-width:46em;line-height:1.5"
_LIVE = "white-space:pre-wrap;margin:0 0 .6em 0"


class StoryView:
    """Title, finished passages, the live passage and the newest reasoning."""

    def __init__(self, title: str, max_entries: int = MAX_ENTRIES):
        self.max_entries = max_entries
        self.title = w.HTML(f"<h3 style='margin:.2em 0 .4em 0'>{escape(title or 'Untitled campaign')}</h3>")
        self.passages = w.HTML()
        self.live = w.HTML()
        self.reasoning = w.HTML()
        self.reasoning_box = w.Accordion(children=[self.reasoning], titles=("Reasoning",), selected_index=None)
        self.reasoning_box.layout.display = "none"
        self.widget = w.VBox([self.title, self.passages, self.live, self.reasoning_box],
                             layout=w.Layout(max_height="32em", overflow="auto"))
        self.widget.add_class("story-workbench-story")
        self._head = ""
        self._streamed = ""
        self._thought = ""

    # ------------------------------------------------------------ finished story
    def show(self, entries, reasoning: str | None = None) -> None:
        """Render the story being read (once per turn or head move, never per token)."""
        hidden = max(0, len(entries) - self.max_entries)
        note = (f"<p style='color:#888;font-size:85%'>{hidden} earlier passages are not shown here; "
                "the transcript (display the campaign) has them all.</p>") if hidden else ""
        body = display.entries_html(entries[hidden:]) or "<p style='color:#888'>The story has not started yet.</p>"
        self.passages.value = f"<div style='{_BOX}'>{note}{body}</div>"
        self.live.value = ""
        self._set_reasoning(reasoning or "")

    # ------------------------------------------------------------ the live passage
    def begin(self, line: str = "", kind: str = "player") -> None:
        """Start a passage: the reader's line (escaped) first, then narration as it streams."""
        self._head = display.entries_html([_Line(kind, line)]) if line.strip() else ""
        self._streamed = ""
        self._set_reasoning("")
        self.live.value = self._live_html()

    def append(self, chunk: str) -> None:
        """Add a streamed piece of narration; only the live passage changes."""
        self._streamed += escape(chunk)
        self.live.value = self._live_html()

    def append_reasoning(self, chunk: str) -> None:
        self._set_reasoning(self._thought + chunk)

    def abandon(self) -> None:
        """The turn wrote nothing: its half-passage must not look written."""
        self._head = self._streamed = ""
        self.live.value = ""

    def _live_html(self) -> str:
        cursor = "<span style='color:#888'> ▍</span>"
        return f"<div style='{_BOX}'>{self._head}<div style='{_LIVE}'>{self._streamed}{cursor}</div></div>"

    def _set_reasoning(self, text: str) -> None:
        self._thought = text
        self.reasoning.value = (f"<div style='white-space:pre-wrap;color:#555;font-size:90%'>{escape(text)}</div>"
                                if text else "")
        self.reasoning_box.layout.display = "" if text.strip() else "none"


class _Line:
    """The shape `display.entries_html` reads, for a line not yet written."""

    def __init__(self, kind: str, text: str):
        self.kind, self.text, self.take, self.takes, self.edited = kind, text, 1, 1, False
