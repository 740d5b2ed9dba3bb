"""The input box and the buttons beside it, enabled only when they apply.

`Controls` is a view: it knows nothing of the campaign. The app computes an
`Availability` from the engine (`can_undo`, `can_redo`, `can_retry`, the
takes, whether a turn is running) and `update` turns it into `.disabled`
flags and tooltips that say why a button cannot be used right now.
"""
from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as w

from engine import html

__all__ = ["Availability", "Controls"]

BUSY = "A turn is being narrated: wait for it, or press Stop."
WHY_NOT = {
    "send": "Write what you do first (or, with Story direction on, what should happen).",
    "direct": "Write what should happen first, e.g. Make the storm break.",
    "undo": "Nothing to undo: the story is at its opening.",
    "redo": "Nothing to redo: this is the latest turn on this line of the story.",
    "retry": "Nothing to retry: the newest passage is not a narration.",
    "edit": "Nothing to edit: the newest passage is not a narration.",
    "finish": "The newest reply was not cut short.",
    "stop": "No turn is running.",
    "first": "This is the first take.",
    "last": "This is the newest take.",
}
TIPS = {
    "send": "Play your line as the next turn (Enter; Shift+Enter starts a new line).",
    "direct": "Tell the narrator what should happen next, out of character (Enter).",
    "cancel_edit": "Close the editor and leave the passage as it was (Escape).",
    "continue": "Let the story go on without acting.",
    "finish": "The newest reply was cut at the reply length: let the narrator finish it.",
    "direction": "Speak to the narrator out of character: 'Make the storm break.'",
    "story_mode": "Story mode: your text goes into the story exactly as typed, and the narrator goes on from it.",
    "undo": "Step back one turn (nothing is deleted; Redo comes back).",
    "redo": "Step forward again along this line of the story.",
    "retry": "Another take of the newest narration (the current one is kept).",
    "edit": "Correct the newest narration where it stands (or click ✎ Edit on any passage): the story after it "
            "and the old text are kept.",
    "stop": "Stop the narration; nothing is written (Escape).",
    "first": "The previous take of the newest narration.",
    "last": "The next take of the newest narration.",
}
# Short enough for two rows of the box at 900 px.
PLACEHOLDER = {
    False: "What do you do? e.g. I open the door · \"Who's there?\" (Enter sends)",
    True: "Out of character: what should happen? e.g. Make the storm break. (Enter sends)",
}
PLACEHOLDER_STORY = "Story mode: prose added exactly as you write it, e.g. The storm broke that night. (Enter sends)"


@dataclass(frozen=True)
class Availability:
    """What applies where the story is now."""

    busy: bool = False
    can_undo: bool = False
    can_redo: bool = False
    can_retry: bool = False
    take: int = 1
    takes: int = 1
    editing: bool = False
    cut: bool = False  # the newest narration was stopped by the reply length


def _button(label: str, tip_key: str, style: str = "", width: str = "auto") -> w.Button:
    button = w.Button(description=label, tooltip=TIPS.get(tip_key, ""), button_style=style,
                      layout=w.Layout(width=width))
    button.add_class(f"sw-{tip_key}")
    return button


class Controls:
    """Input box, Send/Continue/Story direction, Undo/Redo/Retry/Edit/Stop, takes, status."""

    def __init__(self):
        self.text = w.Textarea(placeholder=PLACEHOLDER[False], rows=2, layout=w.Layout(width="100%"))
        self.text.add_class("sw-input")
        self.send = _button("Send", "send", "primary", "100%")
        self.continue_ = _button("Continue", "continue", width="100%")
        self.direction = w.ToggleButton(description="Story direction", tooltip=TIPS["direction"],
                                        layout=w.Layout(width="100%"))
        # Story mode (AI Dungeon's Story): the text is added as typed; one of the two toggles at a time.
        self.story_mode = w.ToggleButton(description="Story mode", tooltip=TIPS["story_mode"],
                                         layout=w.Layout(width="100%"))
        for button in (self.send, self.continue_, self.direction, self.story_mode):
            button.layout.margin = "2px 0"  # the default side margins pushed a 100% button 2 px past its column
        self.undo = _button("↶ Undo", "undo")
        self.redo = _button("↷ Redo", "redo")
        self.retry = _button("⟳ Retry", "retry")
        self.edit = _button("✎ Edit", "edit")
        self.stop = _button("■ Stop", "stop")
        self.finish = _button("Finish the reply ▸", "finish")
        self.prev_take = _button("‹", "first", width="2.5em")
        self.next_take = _button("›", "last", width="2.5em")
        self.take_label = w.HTML()
        self.takes = w.HBox([self.prev_take, self.take_label, self.next_take])
        self.takes.add_class("sw-takes")
        self.status = w.HTML()
        self.status.add_class("sw-status")
        self.widget = self._layout()
        self._state = Availability()
        self.direction.observe(lambda change: self._one_mode(change, self.story_mode), "value")
        self.story_mode.observe(lambda change: self._one_mode(change, self.direction), "value")
        self.text.observe(lambda _: self.update(self._state), "value")
        self.update(self._state)

    def _layout(self) -> w.Widget:
        """The box takes what the buttons leave; rows wrap rather than scroll.

        The action column is sized for its longest label ("Story direction"
        measured 117 px of text plus padding in JupyterLab's 13 px font), and
        never shrinks below it, so no label is clipped at 900 px."""
        self.text.layout = w.Layout(flex="1 1 20em", width="auto", min_width="12em")
        actions = w.VBox([self.send, self.continue_, self.direction, self.story_mode],
                         layout=w.Layout(flex="0 0 11.5em", width="11.5em", overflow="visible"))
        nav = w.HBox([self.undo, self.redo, self.retry, self.edit, self.takes, self.stop, self.finish],
                     layout=w.Layout(flex_flow="row wrap", overflow="visible"))
        top = w.HBox([self.text, actions], layout=w.Layout(width="100%", overflow="visible"))
        box = w.VBox([top, nav, self.status], layout=w.Layout(overflow="visible"))
        box.add_class("sw-controls")
        return box

    # ------------------------------------------------------------ state
    def update(self, state: Availability) -> None:
        """Enable exactly what applies; a disabled button's tooltip says why."""
        self._state = state
        idle = not state.busy
        has_text = bool(self.text.value.strip())
        self.text.disabled = state.busy
        self._enable(self.send, idle and has_text and not state.editing, self._send_key())
        self._enable(self.continue_, idle and not state.editing, "continue")
        self._enable(self.finish, idle and state.cut and not state.editing, "finish")
        self.finish.layout.display = "" if state.cut else "none"
        self._enable(self.undo, idle and state.can_undo and not state.editing, "undo")
        self._enable(self.redo, idle and state.can_redo and not state.editing, "redo")
        self._enable(self.retry, idle and state.can_retry and not state.editing, "retry")
        self._enable(self.edit, idle and (state.can_retry or state.editing),
                     "cancel_edit" if state.editing else "edit")
        self.direction.disabled = state.busy
        self.story_mode.disabled = state.busy
        self._enable(self.stop, state.busy, "stop")
        self.stop.button_style = "danger" if state.busy else ""
        self._update_takes(state)
        self._relabel()

    def _enable(self, button: w.Button, enabled: bool, key: str) -> None:
        button.disabled = not enabled
        if enabled:
            button.tooltip = TIPS.get(key, "")
        elif self._state.busy and key != "stop":
            button.tooltip = BUSY
        elif self._state.editing and key != "cancel_edit":
            button.tooltip = "Finish or cancel the edit first."
        else:
            button.tooltip = WHY_NOT.get(key, "")

    def _one_mode(self, change, other: w.ToggleButton) -> None:
        if change["new"] and other.value:
            other.value = False
        self.update(self._state)

    def _send_key(self) -> str:
        return "direct" if self.direction.value else "send"

    def _update_takes(self, state: Availability) -> None:
        """`‹ 2/4 ›` on the newest narration, shown only when it has several takes."""
        self.takes.layout.display = "" if state.takes > 1 else "none"
        self.take_label.value = html.tag("span", f"{state.take}/{state.takes}", style="padding:0 .4em")
        idle = not state.busy and not state.editing
        self._enable(self.prev_take, idle and state.take > 1, "first")
        self._enable(self.next_take, idle and state.take < state.takes, "last")

    def _relabel(self) -> None:
        editing = self._state.editing
        self.send.description = "Direct" if self.direction.value else "Send"
        self.edit.description = "Cancel edit" if editing else "✎ Edit"
        self.text.placeholder = PLACEHOLDER_STORY if self.story_mode.value else PLACEHOLDER[self.direction.value]

    # ------------------------------------------------------------ messages
    def say(self, message: str, error: bool = False) -> None:
        """A message at the input, in words; errors in red. Always escaped."""
        if not message:
            self.status.value = ""
            return
        colour = "#b00020" if error else "#555"
        role = "alert" if error else "status"
        self.status.value = html.tag("div", message, role=role, style=f"color:{colour};max-width:46em;line-height:1.4")
