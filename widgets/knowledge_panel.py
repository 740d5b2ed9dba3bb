"""Knowledge: the campaign's library of imported .md / .txt sources, with the
reader's choices on each (class, on/off, remove) and its status in words,
all through `camp.knowledge`.

An upload can take a while (chunking, then embedding a large file), so it
runs through the app's runner like a turn, never beside one.
"""
from __future__ import annotations

import threading

import ipywidgets as w

from engine import Campaign, html
from engine.search.classes import CLASS_LABELS, CLASSES

from .common import Confirm, Message, attempt, table_html
from .runner import Runner, describe_error

__all__ = ["KnowledgePanel"]

CLASS_OPTIONS = [(CLASS_LABELS[c], c) for c in CLASSES]
# Few, short columns: the panel is ~470 px wide in a 900 px window with the file browser open.
_COLUMNS = ["id", "title", "class", "used", "passages", "search"]


class KnowledgePanel(w.VBox):
    def __init__(self, camp: Campaign):
        self.camp = camp
        self.status = w.HTML()
        self.listing = w.HTML()
        self.upload = w.FileUpload(accept=".md,.txt,.markdown", multiple=False, description="Choose file")
        self.new_class = w.Dropdown(options=CLASS_OPTIONS, value="reference", description="as",
                                    layout=w.Layout(width="14em"))
        self.add = w.Button(description="Add to library", button_style="primary", layout=w.Layout(width="auto"))
        self.choice = w.Dropdown(description="Source", options=[], layout=w.Layout(width="100%", max_width="30em"))
        self.klass = w.Dropdown(options=CLASS_OPTIONS, description="Class", layout=w.Layout(width="14em"))
        self.enabled = w.Checkbox(description="used in prompts", indent=False, layout=w.Layout(width="auto"))
        self.remove = w.Button(description="Remove…", layout=w.Layout(width="auto"))
        self.refresh_button = w.Button(description="Refresh", layout=w.Layout(width="auto"))
        self.confirm = Confirm("Yes, remove")
        self.message = Message()
        self._background = Runner(threaded=True).start
        self._lock = threading.Lock()
        self._quiet = False
        self._frame = None
        super().__init__([self.status, self.listing,
                          w.HBox([self.upload, self.new_class, self.add], layout=w.Layout(flex_flow="row wrap")),
                          w.HBox([self.choice, self.klass, self.enabled, self.remove, self.refresh_button],
                                 layout=w.Layout(flex_flow="row wrap")),
                          self.confirm, self.message])
        self.add.on_click(lambda _: self.add_upload())
        self.choice.observe(lambda _: self._quiet or self._show_choice(), "value")
        self.klass.observe(lambda ch: self._quiet or self.reclassify(ch["new"]), "value")
        self.enabled.observe(lambda ch: self._quiet or self.switch(ch["new"]), "value")
        self.remove.on_click(lambda _: self.ask_remove())
        self.refresh_button.on_click(lambda _: self.refresh())
        self.refresh()

    def attach(self, app) -> None:
        """Imports run through the app's runner: one job at a time with turns."""
        self._background = app.background

    # ------------------------------------------------------------ actions
    def add_upload(self, name: str | None = None, data: bytes | None = None) -> None:
        """Import the chosen file (or `name`/`data` from code) as the chosen class."""
        if data is None:
            files = list(self.upload.value or ())
            if not files:
                self.message.say("Choose a .md or .txt file first.", error=True)
                return
            name, data = files[0]["name"], bytes(files[0]["content"])
        classification, library = self.new_class.value, self.camp.knowledge
        self.message.say(f"Adding {name}…")

        def done(summary: dict) -> None:
            self.upload.value = ()
            self.message.say(f"Added “{summary.get('title') or name}”: {summary.get('passages', 0)} passages. "
                             f"{summary.get('embedding', '')}")

        def failed(exc: BaseException) -> None:
            self.message.say(describe_error(exc), error=True)

        if not self._background(lambda: library.add(name, data, classification=classification),
                                done, failed, self.refresh):
            self.message.say("A turn is running: add the file when it has finished.", error=True)

    def reclassify(self, classification: str) -> None:
        source = self.choice.value
        if source is not None and attempt(lambda: self.camp.knowledge.reclassify(source, classification),
                                          self.message, f"Source {source} is now {CLASS_LABELS[classification]}."):
            self.refresh()

    def switch(self, on: bool) -> None:
        source, library = self.choice.value, self.camp.knowledge
        if source is None:
            return
        change = library.enable if on else library.disable
        words = "is used in prompts again" if on else "is switched off: no prompt will use it (nothing is deleted)"
        if attempt(lambda: change(source), self.message, f"Source {source} {words}."):
            self.refresh()

    def ask_remove(self) -> None:
        source = self.choice.value
        if source is None:
            return

        def really() -> None:
            if attempt(lambda: self.camp.knowledge.delete(source), self.message,
                       f"Source {source} removed (past turns keep the text they were shown)."):
                self.refresh()
        self.confirm.ask(f"Remove source {source} and its passages? This cannot be undone.", really)

    # ------------------------------------------------------------ view
    def refresh(self) -> None:
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        try:
            library = self.camp.knowledge
            frame, status = library.list(), library.status()
        except Exception as exc:  # noqa: BLE001 - shown in place
            self.status.value = ""
            self.message.say(describe_error(exc), error=True)
            return
        self._frame = frame
        self.status.value = html.tag("p", status.words, cls="sw-knowledge-status", style="margin:.2em 0")
        rows = [(i, r.title, CLASS_LABELS.get(r["class"], r["class"]), "yes" if r.enabled else "off",
                 f"{r.passages} ({r.tokens:,} tokens)", _search_words(r)) for i, r in frame.iterrows()]
        self.listing.value = table_html(_COLUMNS, rows, "sw-knowledge") if rows else ""
        before = self.choice.value
        options = [(f"{i}: {r.title}", int(i)) for i, r in frame.iterrows()]
        self._quiet = True
        try:
            self.choice.options = options
            self.choice.value = before if before in {v for _, v in options} else (options[-1][1] if options else None)
        finally:
            self._quiet = False
        self._show_choice()

    def _show_choice(self) -> None:
        source = self.choice.value
        chosen = source is not None and self._frame is not None and source in self._frame.index
        for control in (self.klass, self.enabled, self.remove):
            control.disabled = not chosen
        self.confirm.layout.display = "none"
        if chosen:
            row = self._frame.loc[source]
            self._quiet = True
            try:
                self.klass.value, self.enabled.value = row["class"], bool(row["enabled"])
            finally:
                self._quiet = False


def _search_words(row) -> str:
    """Word search and vectors in a few words: "words ready, 3/5 vectors"."""
    vectors = f"{row.embedded}/{row.passages} vectors" if row.embed_state != "idle" or row.embedded else "no vectors"
    return f"words {row.index_state}, {vectors}"
