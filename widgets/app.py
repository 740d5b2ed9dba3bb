"""`CampaignApp(camp)`: a playable campaign in one notebook cell.

The app is glue: the story view, the context meter, the controls, save
points and the panels are separate views, and every click becomes one
`Campaign` call. Keys and clicks ipywidgets cannot hear (Enter, Escape, a
passage's Edit mark) arrive through widgets/keys.py; editing in place is in
widgets/editing.py; `transcript()` and `records_view()` are views for the
cells below the app that it keeps current. Turns run
through a `Runner` (a background thread by default) so the kernel stays free
for the Stop button; head moves (undo, redo, takes, edits, restores) are
quick database writes and run inline. Anything that fails is shown in words
at the input, and the controls come back.

Where widgets do not render (an executed or exported notebook) the app
displays as a static HTML transcript of the story.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import ipywidgets as w

from engine import Campaign, TurnCancelled, TurnFailed, display, html

from .common import table_html
from .controls import Availability, Controls
from .editing import PassageEditing
from .keys import KeyBridge
from .live import PLAY_RECORD_COLUMNS, LiveView
from .meter import ContextMeter
from .panels import PANELS, Factory, build_panels
from .runner import Runner, describe_error
from .savepoints import SavePointsBar
from .speech import ReadAloud, newest_passage
from .story_view import Cut, StoryView

__all__ = ["CampaignApp"]


class CampaignApp(PassageEditing):
    """Play `camp` from a notebook: `CampaignApp(camp)` as the last line of a cell.

    `threaded=False` runs each turn before the click returns (tests, scripts).
    `panels` replaces the class-wide `CampaignApp.panels` list of
    `(title, factory)` for this app only."""

    panels: ClassVar[list[tuple[str, Factory]]] = PANELS

    def __init__(self, camp: Campaign, *, threaded: bool = True, panels: list[tuple[str, Factory]] | None = None):
        self.camp = camp
        self.runner = Runner(threaded)
        self.error: str | None = None
        self._editing: int | None = None
        self._cut: Cut | None = None
        self._head_turn = None
        self._followers: list = []
        self._stopping = False
        self._history: list = []
        self._script: deque[str] = deque()
        self._script_idle = threading.Event()
        self._script_idle.set()
        self._availability = Availability()
        self.story = StoryView(camp.title)
        self.meter = ContextMeter()
        self.controls = Controls()
        self.keys = KeyBridge()
        self.save_points = SavePointsBar(camp, changed=self.refresh, say=self._say)
        self.read_aloud = ReadAloud(lambda: newest_passage(self._history))  # widgets/speech.py
        self.panel_box, self.panel_widgets = build_panels(camp, self.panels if panels is None else panels)
        self.widget = w.VBox([self.story.widget, self.meter.widget, self.controls.widget, self.read_aloud.widget,
                              self.save_points.widget, self.panel_box, self.keys])
        self.widget.add_class("story-workbench-app")
        self._wire()
        for panel in self.panel_widgets:
            if hasattr(panel, "attach"):
                panel.attach(self)
        self.refresh()

    def _wire(self) -> None:
        c = self.controls
        c.send.on_click(lambda _: self.send())
        c.continue_.on_click(lambda _: self.continue_story())
        c.retry.on_click(lambda _: self.retry())
        c.undo.on_click(lambda _: self.undo())
        c.redo.on_click(lambda _: self.redo())
        c.edit.on_click(lambda _: self.toggle_edit())
        c.stop.on_click(lambda _: self.stop())
        c.finish.on_click(lambda _: self.continue_story())
        c.prev_take.on_click(lambda _: self._step_take(-1))
        c.next_take.on_click(lambda _: self._step_take(+1))
        self.story.editor.save.on_click(lambda _: self.save_edit())
        self.story.editor.cancel.on_click(lambda _: self.cancel_edit())
        self.story.editor.branch.on_click(lambda _: self.branch_edit())
        self.keys.on_action(self._key)

    def _key(self, action: str, content: dict) -> None:
        """What a key or a click in the page asked for (widgets/keys.py)."""
        if action == "send":
            self.send(str(content.get("text", "")))
        elif action == "stop":
            self.stop()
        elif action == "edit" and isinstance(content.get("id"), int | float):
            self.edit_passage(int(content["id"]))
        elif action == "save_edit":
            self.save_edit(str(content.get("text", self.story.editor.text.value)))
        elif action == "cancel_edit":
            self.cancel_edit()
        elif action == "take" and isinstance(content.get("id"), int | float):
            self.step_take_of(int(content["id"]), -1 if content.get("step") == -1 else 1)

    # ------------------------------------------------------------ turns
    def send(self, text: str | None = None) -> None:
        """What Send (or Enter) does: act, direct with Story direction on, or
        add prose as typed with Story mode on."""
        if text is not None:
            self.controls.text.value = text
        text = self.controls.text.value
        if self._editing is not None:
            self._say("Finish or cancel the edit first (Save, or Cancel / Escape).", error=True)
        elif self.controls.direction.value:
            self.direct(text)
        elif self.controls.story_mode.value:
            self.tell(text)
        else:
            self.act(text)

    def act(self, text: str) -> None:
        self._turn(lambda **cb: self.camp.act(text, **cb), line=text, kind="player", needs_text=True)

    def tell(self, text: str) -> None:
        """Story mode: the text goes into the story exactly as typed."""
        self._turn(lambda **cb: self.camp.act(text, mode="story", **cb), line=text, kind="player", needs_text=True)

    def direct(self, text: str) -> None:
        self._turn(lambda **cb: self.camp.direct(text, **cb), line=text, kind="direction", needs_text=True)

    def continue_story(self) -> None:
        """Continue (and Finish the reply): the narrator writes on in the newest
        narration itself, one passage and one take (SillyTavern's continue);
        after the opening, where there is no narration yet, it writes the first."""
        head = self._history[-1] if self._history else None
        if head is None or head.kind != "narrator":
            self._turn(lambda **cb: self.camp.continue_story(**cb))
            return
        carried = head.text + (" " + self._cut.tail if self._cut is not None and self._cut.node_id == head.id
                               and self._cut.tail and not head.text.endswith(self._cut.tail) else "")
        self._turn(lambda **cb: self.camp.extend(**cb), extend=(head, carried))

    def retry(self) -> None:
        self._turn(lambda **cb: self.camp.retry(**cb), retry=True)

    def play(self, inputs: Iterable[str], *, wait: bool = False) -> None:
        """Play scripted inputs one after another, each streaming into the app.

        The turns run through the app's runner, so the cell returns at once and
        Stop works (it also drops the inputs not yet played). `wait=True` blocks
        until the script is over and raises TurnFailed with the first failure:
        the headless path (papermill), where nobody can press Stop anyway."""
        self._script = deque(str(text) for text in inputs)
        self.error, self._stopping = None, False
        self._script_idle.clear()
        self._play_next()
        if wait:
            self.wait()
            if self.error:
                raise TurnFailed(self.error)

    def _play_next(self) -> None:
        """Start the next scripted input, or mark the script finished."""
        if self._stopping or self.error or not self._script:
            self._script.clear()
            self._script_idle.set()
            return
        self.act(self._script.popleft())

    def stop(self) -> None:
        """Cancel the running turn: the engine raises TurnCancelled and writes nothing.

        `Campaign.stop()` does nothing until the turn has registered its cancel
        event, so the request is also remembered and repeated on the next
        streamed chunk: a Stop clicked in the first instant still stops.
        Scripted inputs not yet played are dropped."""
        self._script.clear()
        if self.runner.busy:
            self._stopping = True
            self.camp.stop()
            self._say("Stopping…")

    def _streamed(self, chunk: str) -> None:
        if self._stopping:
            self.camp.stop()
            return
        self.story.append(chunk)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running turn, and any scripted inputs, are over (scripts and tests)."""
        if not self._script_idle.wait(timeout):
            return False
        return self.runner.wait(timeout)

    def _turn(self, call: Callable[..., Any], line: str = "", kind: str = "player",
              needs_text: bool = False, retry: bool = False, extend: tuple | None = None) -> None:
        scripted = not self._script_idle.is_set()
        refusal = ("Write what you do first (or, with Story direction on, what should happen)."
                   if needs_text and not line.strip() else
                   "A turn is already being narrated: wait for it, or press Stop." if self.runner.busy else None)
        if refusal:
            self.error = refusal
            self._say(refusal, error=True)
            if scripted and not self.runner.busy:
                self._play_next()  # a scripted line it refused ends the script; a click during one does not
            return
        self._say("")
        self._stopping = False
        if retry and self._history and self._history[-1].kind == "narrator":
            self.story.show(self._history[:-1])  # the new take streams in its place
        if extend is not None:  # the passage streams on where it stands
            self.story.show(self._history[:-1])
            self.story.begin(carried=extend[1])
        else:
            self.story.begin(line, kind)

        def after() -> None:
            self.refresh()
            if scripted:
                self._play_next()
        started = self.background(
            lambda: call(on_text=self._streamed, on_reasoning=self.story.append_reasoning,
                         on_status=self.story.status),
            lambda turn: self._turn_done(turn, consumed=needs_text), self._turn_failed, after)
        if not started and scripted:
            self._script_idle.set()

    def _turn_done(self, turn, consumed: bool) -> None:
        """The input box empties only when its text was played (Continue leaves a draft alone)."""
        if consumed:
            self.controls.text.value = ""
        self.error = None
        self._say(_written(turn))
        self._follow_derived()

    def follow(self, view):
        """Keep another view of the campaign (`view.refresh()`) in step with the app; returns it."""
        self._followers.append(view)
        return view

    def transcript(self) -> LiveView:
        """The story so far, for a cell below the app: kept current after every turn."""
        return self.follow(LiveView(lambda: display.story_html(self.camp.title, self.camp.history()),
                                    "sw-transcript"))

    def records_view(self, columns: list[str] | None = None) -> LiveView:
        """One row per turn (`camp.records()`, these columns), kept current after every turn."""
        columns = list(columns or PLAY_RECORD_COLUMNS)

        def render():
            frame = self.camp.records()
            if not len(frame):
                return html.tag("p", "No narrated turn yet: the rows appear here as you play.", style="color:#888")
            shown = frame[[c for c in columns if c in frame.columns]]
            return table_html(shown.columns, shown.itertuples(index=False), "sw-records")
        return self.follow(LiveView(render, "sw-records-view"))

    def _follow_derived(self) -> None:
        """Memories and state are derived after a turn's commit, in the engine's
        own background thread: re-read the panels once that work is done."""
        wait = getattr(self.camp, "wait_derived", None)
        if not (self.runner.threaded and callable(wait)):
            return  # inline: derived work (if any) already ran

        def follow() -> None:
            try:
                wait(600)
            except Exception:  # noqa: BLE001 - the panels' own Refresh still works
                return
            for panel in self.panel_widgets:
                self._refresh_panel(panel)
        threading.Thread(target=follow, name="story-workbench-derived", daemon=True).start()

    def _turn_failed(self, exc: BaseException) -> None:
        """The message goes both where the passage was and at the input; the
        controls come back when the runner calls `after`."""
        self.error = describe_error(exc)
        stopped = isinstance(exc, TurnCancelled)
        self.story.abandon("" if stopped else self.error)
        self._say(self.error, error=not stopped)

    def background(self, job: Callable[[], Any], done: Callable[[Any], None],
                   failed: Callable[[BaseException], None], after: Callable[[], None]) -> bool:
        """Run a slow job through the app's runner with the controls disabled
        meanwhile; panels use this (via `attach`) so their work never overlaps
        a turn. Returns False, doing nothing, if a job is already running."""
        if self.runner.busy:
            return False
        self._update_controls(busy=True)  # before the thread starts: it may finish first

        def then() -> None:
            after()
            self._update_controls()
        return self.runner.start(job, done, failed, then)

    # ------------------------------------------------------------ head moves
    def undo(self) -> None:
        self._move(self.camp.undo, "Stepped back one turn; Redo brings it back.")

    def redo(self) -> None:
        self._move(self.camp.redo, "Stepped forward again.")

    def select_take(self, n: int) -> None:
        if self._move(lambda: self.camp.select_take(n)):
            a = self._availability
            self._say(f"Showing take {a.take} of {a.takes}.")

    def _step_take(self, step: int) -> None:
        self.select_take(self._availability.take + step)

    def step_take_of(self, node_id: int, step: int) -> None:
        """The ‹ › arrows on a passage: its previous or next take, where it stands
        (each take keeps its own story after it)."""
        if self._editing is not None:
            self._say("Finish or cancel the edit first (Save, or Cancel / Escape).", error=True)
            return
        entry = next((e for e in self._history if e.id == node_id), None)
        if entry is None or entry.takes <= 1:
            return
        n = entry.take + step
        if self._move(lambda: self.camp.select_take(n, node_id)):
            self._say(f"Showing take {n} of {entry.takes} of that passage.")

    def _move(self, action: Callable[[], Any], done: str = "") -> bool:
        if self.runner.busy:
            self._say("A turn is being narrated: wait for it, or press Stop.", error=True)
            return False
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - shown in words at the input
            self.error = describe_error(exc)
            self._say(self.error, error=True)
            self.refresh()
            return False
        self.error = None
        self._say(done)
        self.refresh()
        return True

    # ------------------------------------------------------------ view
    def refresh(self) -> None:
        """Re-read the story and what applies, then update every view and panel."""
        try:
            self._history = self.camp.history()
            self._availability = self._read_availability()
        except Exception as exc:  # noqa: BLE001 - a vanished file or campaign, in words
            self._history, self._availability = [], Availability(busy=self.runner.busy)
            self._say(describe_error(exc), error=True)
        self._head_turn = self._read_head_turn()
        self._cut = self._read_cut()
        if self._editing is not None and not any(e.id == self._editing for e in self._history):
            self._editing = None  # the passage left the story being read
        self.story.editing = self._editing
        self.story.show(self._history, getattr(self._head_turn, "reasoning", None), self._cut)
        self.meter.show(self._head_turn, self._number_of_head())
        self._update_controls()
        self.save_points.refresh()
        for panel in [*self.panel_widgets, *self._followers]:
            self._refresh_panel(panel)

    def _read_availability(self) -> Availability:
        camp, head = self.camp, (self._history[-1] if self._history else None)
        narrated = head is not None and head.kind == "narrator"
        return Availability(busy=self.runner.busy, can_undo=camp.can_undo, can_redo=camp.can_redo,
                            can_retry=camp.can_retry, take=head.take if narrated else 1,
                            takes=head.takes if narrated else 1)

    def _read_head_turn(self):
        """The newest narration's record (reasoning, cut, the context report), or None."""
        head = self._history[-1] if self._history else None
        if head is None or head.kind != "narrator":
            return None
        try:
            return self.camp.turn(head.id)
        except Exception:  # noqa: BLE001 - decoration: the story still shows
            return None

    def _read_cut(self) -> Cut | None:
        """The newest narration, if the reply length stopped it (engine.turns.record: cut, tail)."""
        turn = self._head_turn
        if turn is None or not getattr(turn, "cut", False):
            return None
        head = self._history[-1]
        if head.edited and not self._continued_last(head.id):
            return None  # the reader's own text since the cut: theirs to finish
        return Cut.of(turn.id, head.text, str(getattr(turn, "tail", "") or ""))

    def _continued_last(self, node_id: int) -> bool:
        """Whether the narrator, not the reader, made the passage's newest text."""
        try:
            texts = self.camp.revisions(node_id)
        except Exception:  # noqa: BLE001 - decoration
            return False
        return len(texts) > 1 and texts[-2].reason == "continued"

    def _number_of_head(self) -> int:
        return sum(1 for e in self._history if e.kind == "narrator")

    def _update_controls(self, busy: bool | None = None) -> None:
        busy = self.runner.busy if busy is None else busy
        a = self._availability
        self.controls.update(Availability(busy, a.can_undo, a.can_redo, a.can_retry, a.take, a.takes,
                                          self._editing is not None, self._cut is not None))
        self.save_points.set_busy(busy, editing=self._editing is not None)

    def _refresh_panel(self, panel) -> None:
        refresh = getattr(panel, "refresh", None)
        if callable(refresh):
            try:
                refresh()
            except Exception as exc:  # noqa: BLE001 - a panel's bug stays in its panel
                self._say(f"A panel could not update: {describe_error(exc)}", error=True)

    def _say(self, message: str, error: bool = False) -> None:
        self.controls.say(message, error)

    # ------------------------------------------------------------ display
    def _repr_html_(self) -> str:
        """The static transcript: what an executed or exported notebook shows."""
        try:
            entries = self.camp.history()
            title = self.camp.title
        except Exception as exc:  # noqa: BLE001
            return display.text_html(describe_error(exc))
        return display.story_html(title, entries, footer="Static transcript: run the cell in Jupyter to play.")

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        """The live widget where widgets render, the transcript everywhere else."""
        widget_bundle = getattr(self.widget, "_repr_mimebundle_", None)  # None once the widget is closed
        bundle = dict(widget_bundle(**kwargs) or {}) if callable(widget_bundle) else {}
        bundle["text/html"] = self._repr_html_()
        bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        return f"<CampaignApp for {self.camp!r}>"


def _written(turn) -> str:
    take = f" (take {turn.take}/{turn.takes})" if turn.takes > 1 else ""
    words = len(turn.text.split())
    cut = (" It was cut at the reply length: Finish the reply lets the narrator complete it."
           if getattr(turn, "cut", False) else "")
    return f"Written: {words} words{take}.{cut}"
