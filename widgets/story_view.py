"""The story as it is read, and the passage being written.

Finished passages live in one HTML widget and the passage being narrated in
another, so a streamed token appends to a short string instead of re-sending
the whole story to the browser. Every string from the narrator or the reader
goes through `engine.html` (via `engine.display`): markup in a reply shows as
characters and never becomes markup in the page.

The scrolling box lays its children out bottom-up (`column-reverse`): the
browser then keeps the view pinned to the newest text as it grows, and leaves
it where it is once the reader has scrolled up, as chat apps do. That needs
no JavaScript, which ipywidgets' HTML would not run anyway.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import ipywidgets as w

from engine import display, html
from engine.html import Html

__all__ = ["Cut", "PassageEditor", "StoryView", "last_sentence_end"]

# A very long story is still one click away in the transcript; the live view
# shows its end so a turn never sends megabytes to the browser.
MAX_ENTRIES = 300
# How often the "waiting" line counts up: once a second is enough to show the
# app is alive during a 20-60 s model load without flooding the browser.
TICK_SECONDS = 1.0

_BOX = "max-width:46em;line-height:1.5"
_LIVE = "white-space:pre-wrap;margin:0 0 .6em 0"
_WAITING = "color:#666;font-style:italic"
_CUT = "color:#8a5a00;font-size:85%;margin:-.3em 0 .6em 0"
# The Edit mark floats at the top right of its passage, quiet until wanted.
_MARK = "float:right;margin-left:.8em;font-size:75%;color:#999;cursor:pointer;user-select:none"
_EDIT_TIP = {"narrator": "Edit this narration where it stands: the story after it is kept, and so is the old text.",
             "player": "Edit your line where it stands: the story after it is kept, and so is the old text.",
             "direction": "Edit this direction where it stands: the story after it is kept, and so is the old text."}
# The takes of a passage, on the passage itself: ‹ n/m ›.
_TAKES = "font-size:80%;color:#777;margin-left:.4em;user-select:none;white-space:nowrap"
_TAKE_ARROW = "cursor:pointer;padding:0 .35em;color:#1a4f8b"
_TAKE_OFF = "padding:0 .35em;color:#ccc"
# Every child of the scrolling box keeps its own height: flex items shrink by
# default, and a box with overflow of its own (every ipywidgets box) may shrink
# to nothing, which is how the editor had a height of 0 in a long story.
_KEEP = "0 0 auto"
# Where a sentence may end: a stop, then any closing quotes or brackets.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")


def last_sentence_end(text: str) -> int:
    """Where the last complete sentence of `text` ends (0 when none does)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return ends[-1] if ends else 0


@dataclass(frozen=True)
class Cut:
    """A narration stopped by the reply length: `shown` is what the view
    shows (its last complete sentence), `tail` what is kept beyond it."""

    node_id: int
    shown: str
    tail: str

    @classmethod
    def of(cls, node_id: int, text: str, tail: str = "") -> Cut:
        """From the engine's cut-off `tail` when it gives one, else from the
        last complete sentence of `text` (the whole text if none ends)."""
        if tail and text.endswith(tail) and text[: -len(tail)].strip():
            return cls(node_id, text[: -len(tail)].rstrip(), tail)
        end = last_sentence_end(text)
        if tail or not end:  # the engine already trimmed the text, or no sentence ends
            return cls(node_id, text, tail)
        return cls(node_id, text[:end], text[end:])


class PassageEditor:
    """A larger editor where the passage stood: Save (a new revision in
    place, the story after it kept), Branch from here (the old take and its
    future kept beside the new one), Cancel, and the passage's earlier texts."""

    def __init__(self):
        self.text = w.Textarea(rows=6, layout=w.Layout(width="100%", min_height="7em"),
                               tooltip="Ctrl+Enter saves; Escape cancels.")
        self.text.add_class("sw-editor-text")
        self.save = w.Button(description="Save", button_style="primary",
                             tooltip="Save where it stands: the story after it is kept, the old text too "
                                     "(Ctrl+Enter).", layout=w.Layout(width="auto"))
        self.branch = w.Button(description="Branch from here",
                               tooltip="Keep this passage and its future as they are, and start a new line of the "
                                       "story from the text in the box.", layout=w.Layout(width="auto"))
        self.cancel = w.Button(description="Cancel", tooltip="Leave the passage as it was (Escape).",
                               layout=w.Layout(width="auto"))
        self.revisions = w.Dropdown(options=[], layout=w.Layout(width="auto", max_width="22em"),
                                    tooltip="Earlier texts of this passage: choose one to load it into the box, "
                                            "then Save to bring it back.")
        self.save.add_class("sw-editor-save")
        self.branch.add_class("sw-editor-branch")
        self.cancel.add_class("sw-editor-cancel")
        self.revisions.add_class("sw-editor-revisions")
        self._texts: dict[int, str] = {}
        self._offering = False
        self.revisions.observe(self._load, "value")
        self.widget = w.VBox([self.text, w.HBox([self.save, self.branch, self.cancel, self.revisions],
                                                layout=w.Layout(flex_flow="row wrap"))],
                             layout=w.Layout(max_width="46em", margin="0 0 .6em 0", display="none", flex=_KEEP,
                                             overflow="visible"))
        self.widget.add_class("sw-editor")

    def offer(self, revisions) -> None:
        """The passage's texts (engine.views.Revision, oldest first); the list
        shows only when there is an earlier one."""
        self._texts = {r.n: r.text for r in revisions}
        options = [(f"Text {r.n} of {len(revisions)}" + (" (now)" if r.current else f": {_short(r.text)}"), r.n)
                   for r in reversed(revisions)]
        self._offering = True  # the box keeps what it was opened with (a cut reply's whole text)
        try:
            self.revisions.options = options  # the first, the text shown now, is chosen
        finally:
            self._offering = False
        self.revisions.layout.display = "" if len(revisions) > 1 else "none"

    def _load(self, change) -> None:
        if not self._offering and change["new"] in self._texts:
            self.text.value = self._texts[change["new"]]


def _short(text: str, words: int = 6) -> str:
    head = text.split()
    return " ".join(head[:words]) + ("…" if len(head) > words else "")


class StoryView:
    """Title, finished passages, the live passage, what the narrator is doing,
    a failed turn's message, and the newest reasoning."""

    def __init__(self, title: str, max_entries: int = MAX_ENTRIES):
        self.max_entries = max_entries
        self.title = w.HTML(html.tag("h3", title or "Untitled campaign", style="margin:.2em 0 .4em 0"))
        self.passages = w.HTML()
        self.passages.add_class("sw-passages")
        self.after = w.HTML()  # the passages below one being edited
        self.editor = PassageEditor()
        self.editing: int | None = None
        self._entries: list = []
        self._cut: Cut | None = None
        self.live = w.HTML()
        self.live.add_class("sw-live")
        self.notice = w.HTML()
        self.notice.add_class("sw-notice")
        self.reasoning = w.HTML()
        self.reasoning_box = w.Accordion(children=[self.reasoning], titles=("Reasoning",), selected_index=None)
        self.reasoning_box.layout.display = "none"
        # Children are listed newest-first because the box is column-reverse.
        children = [self.reasoning_box, self.notice, self.live, self.after, self.editor.widget, self.passages]
        for child in children:
            child.layout.flex = _KEEP
        self.scroller = w.Box(children, layout=w.Layout(display="flex", flex_flow="column-reverse",
                                                        max_height="60vh", min_height="8em", overflow="auto"))
        self.scroller.add_class("story-workbench-story")
        self.widget = w.VBox([self.title, self.scroller])
        self._head = Html("")
        self._streamed = Html("")
        self._carried = Html("")
        self._thought = ""
        self._waiting: str | None = None
        self._since = 0.0
        self._ticker: threading.Thread | None = None
        # The ticker thread and the turn thread both write the live passage.
        self._live_lock = threading.Lock()

    # ------------------------------------------------------------ finished story
    def show(self, entries, reasoning: str | None = None, cut: Cut | None = None) -> None:
        """Render the story being read (once per turn or head move, never per token).

        Each passage carries an Edit mark (widgets/keys.py hears its click)
        and its node id in a class name. `cut` marks the newest narration as
        stopped by the reply length: the view ends it at its last complete
        sentence (the stored text is whole) and says so."""
        self._entries, self._cut = list(entries), cut
        self._render()
        with self._live_lock:
            self._waiting = None
            self.live.value = ""
        self._set_reasoning(reasoning or "")

    def edit_in_place(self, node_id: int, text: str) -> bool:
        """Open the editor where passage `node_id` stands; False if it is not shown."""
        if not any(getattr(e, "id", None) == node_id for e in self._entries[-self.max_entries:]):
            return False
        self.editing = node_id
        self.editor.text.value = text
        self.editor.text.rows = max(4, min(18, len(text) // 70 + text.count("\n") + 2))
        self._render()
        return True

    def close_editor(self) -> None:
        self.editing = None
        self._render()

    def _render(self) -> None:
        entries = self._entries
        hidden = max(0, len(entries) - self.max_entries)
        note = html.tag("p", f"{hidden} earlier passages are not shown here; the transcript (display the campaign) "
                             "has them all.", style="color:#888;font-size:85%") if hidden else ""
        shown = entries[hidden:]
        at = (None if self.editing is None else
              next((i for i, e in enumerate(shown) if getattr(e, "id", None) == self.editing), None))
        if at is None:
            self.editing = None
            body = self._passages(shown) or display.not_started_html()
            self.passages.value = html.tag("div", note + body, style=_BOX)
            self.after.value = ""
            self.editor.widget.layout.display = "none"
            return
        self.passages.value = html.tag("div", note + self._passages(shown[:at]), style=_BOX)
        self.after.value = html.tag("div", self._passages(shown[at + 1:]), style=_BOX) if at + 1 < len(shown) else ""
        self.editor.widget.layout.display = ""

    def _passages(self, entries) -> Html:
        return Html("").join(self._passage(e) for e in entries)

    def _passage(self, entry) -> Html:
        node_id = getattr(entry, "id", None)
        node_id = node_id if isinstance(node_id, int) else None  # the id travels in a class name: digits only
        cut = self._cut if self._cut is not None and node_id is not None and self._cut.node_id == node_id else None
        if cut is not None:
            entry = _Shown(entry, cut.shown)
        mark = (html.tag("span", "✎ Edit", cls="sw-edit-mark", role="button", title=_EDIT_TIP[entry.kind],
                         style=_MARK) if node_id is not None and entry.kind in _EDIT_TIP else "")
        flag = html.tag("div", "✂ Cut short at the reply length: shown to its last whole sentence (the rest is kept "
                               "with the turn). Finish the reply ▸ lets the narrator go on.",
                        cls="sw-cut-mark", style=_CUT) if cut is not None else ""
        takes = _takes(entry) if node_id is not None else ""
        if takes:
            entry = _Shown(entry, entry.text, takes=1)  # the arrows below replace the plain ‹ n/m › label
        node = f" sw-node-{node_id}" if node_id is not None else ""
        return html.tag("div", mark + display.entries_html([entry]) + takes + flag, cls=f"sw-passage{node}",
                        style="display:flow-root")

    # ------------------------------------------------------------ the live passage
    def begin(self, line: str = "", kind: str = "player", carried: str = "") -> None:
        """Start a passage: the reader's line (escaped), then what the narrator is
        doing until its first words arrive, then the narration as it streams.
        `carried`: the passage being continued, which the new words follow."""
        self._head = display.entries_html([_Line(kind, line)]) if line.strip() else Html("")
        self._carried = html.text(carried.rstrip() + " ") if carried.strip() else Html("")
        self._streamed = Html("")
        self.notice.value = ""
        self._set_reasoning("")
        self._since = time.monotonic()
        self.status("Waiting for the narrator…")
        self._start_ticker()

    def status(self, text: str) -> None:
        """What the narrator is doing before it writes (loading, reading the prompt)."""
        if self._streamed:
            return  # words are arriving: they say enough
        with self._live_lock:
            self._waiting = text
            self.live.value = self._live_html()

    def append(self, chunk: str) -> None:
        """Add a streamed piece of narration; only the live passage changes."""
        with self._live_lock:
            self._waiting = None
            self._streamed += html.text(chunk)
            self.live.value = self._live_html()

    def append_reasoning(self, chunk: str) -> None:
        self._set_reasoning(self._thought + chunk)

    def abandon(self, message: str = "") -> None:
        """The turn wrote nothing: its half-passage must not look written, and
        the reason stays in the story where the passage would have been."""
        with self._live_lock:
            self._head = self._streamed = self._carried = Html("")
            self._waiting = None
            self.live.value = ""
        self.notice.value = html.tag("div", message, role="alert", style=f"{_BOX};color:#b00020;border-left:3px solid "
                                     "#b00020;padding-left:.6em") if message else ""

    def _start_ticker(self) -> None:
        """Count the seconds while waiting, so a slow start never looks frozen."""
        if self._ticker is not None and self._ticker.is_alive():
            return

        def tick() -> None:
            while self._waiting is not None:
                time.sleep(TICK_SECONDS)
                with self._live_lock:
                    if self._waiting is not None:
                        self.live.value = self._live_html()
        self._ticker = threading.Thread(target=tick, name="story-workbench-waiting", daemon=True)
        self._ticker.start()

    def _live_html(self) -> Html:
        if self._waiting is not None:
            seconds = int(time.monotonic() - self._since)
            clock = f" · {seconds} s since you sent" if seconds >= 1 else ""
            body = self._carried + html.tag("div", self._waiting + clock, role="status", style=_WAITING)
        else:
            body = self._carried + self._streamed + html.tag("span", " ▍", style="color:#888")
        return html.tag("div", self._head + html.tag("div", body, style=_LIVE), style=_BOX)

    def _set_reasoning(self, text: str) -> None:
        self._thought = text
        self.reasoning.value = (html.tag("div", text, style="white-space:pre-wrap;color:#555;font-size:90%")
                                if text else "")
        self.reasoning_box.layout.display = "" if text.strip() else "none"

    @property
    def waiting(self) -> str | None:
        """What the view says it is waiting for, or None once words arrive or the turn ends."""
        return self._waiting


def _takes(entry) -> Html | str:
    """‹ n/m › under a narration with several takes: the arrows switch takes
    where the passage stands (widgets/keys.py hears the click)."""
    if entry.kind != "narrator" or entry.takes <= 1:
        return ""
    prev = (html.tag("span", "‹", cls="sw-take-prev", role="button", title="The previous take of this passage.",
                     style=_TAKE_ARROW) if entry.take > 1 else html.tag("span", "‹", style=_TAKE_OFF))
    after = (html.tag("span", "›", cls="sw-take-next", role="button", title="The next take of this passage.",
                      style=_TAKE_ARROW) if entry.take < entry.takes else html.tag("span", "›", style=_TAKE_OFF))
    return html.tag("div", prev + f"{entry.take}/{entry.takes}" + after, cls="sw-passage-takes", style=_TAKES,
                    title="Takes of this passage: each keeps its own story after it.")


class _Shown:
    """An entry shown with other text (a cut narration ends at its last sentence)."""

    def __init__(self, entry, text: str, takes: int | None = None):
        self.id, self.kind, self.text = entry.id, entry.kind, text
        self.take, self.edited = entry.take, entry.edited
        self.takes = entry.takes if takes is None else takes


class _Line:
    """The shape `display.entries_html` reads, for a line not yet written."""

    def __init__(self, kind: str, text: str):
        self.kind, self.text, self.take, self.takes, self.edited = kind, text, 1, 1, False
