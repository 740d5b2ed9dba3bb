"""The context meter: how full the narrator's window was on the newest turn.

One bar under the story, drawn from the turn's own report (never
recomputed): the prompt's sections grouped as the turn records group them
(engine.turns.record.SECTION_COLUMNS: rules and setup, lore and knowledge,
history, summary, memories, state, hints), the reply, and what was left
free, against the window the prompt was built to. A player sees at a glance
when the story is about to outgrow the window; the Context panel has the
section-by-section detail.
"""
from __future__ import annotations

import ipywidgets as w

from engine import html
from engine.context import Report
from engine.html import Html
from engine.turns.record import SECTION_COLUMNS

__all__ = ["GROUPS", "ContextMeter", "meter_parts"]

# Words and colours for each group of sections (the record's tok_* columns).
GROUPS = {
    "tok_system": ("rules and setup", "#4c72b0"),
    "tok_knowledge": ("lore and knowledge", "#8172b3"),
    "tok_history": ("story history", "#55a868"),
    "tok_summary": ("summary", "#64b5cd"),
    "tok_memories": ("memories", "#ccb974"),
    "tok_state": ("state", "#937860"),
    "tok_hints": ("hints", "#8c8c8c"),
}
_OTHER = ("other", "#bbbbbb")
_REPLY = ("reply", "#dd8452")


def _whole(value) -> int:
    return int(value) if isinstance(value, int | float) and value == value and 0 <= value < 10**12 else 0


def meter_parts(report, usage: dict | None = None) -> tuple[list[tuple[str, int, str]], int]:
    """[(words, tokens, colour)] for each non-empty group, then the reply; and the window.

    The window is the budget the prompt was built to (the narrator's window
    when that is smaller), so used + free adds up to what the narrator had."""
    report = report if isinstance(report, Report) else Report(report or {})
    grouped = dict.fromkeys(SECTION_COLUMNS, 0)
    other = 0
    for section in report.sections:
        name, cost = section.name, _whole(section.tokens)
        column = next((c for c, names in SECTION_COLUMNS.items() if name in names), None)
        if column is None:
            other += cost
        else:
            grouped[column] += cost
    parts = [(GROUPS.get(c, (c, "#999"))[0], n, GROUPS.get(c, (c, "#999"))[1]) for c, n in grouped.items() if n]
    if other:
        parts.append((_OTHER[0], other, _OTHER[1]))
    reply = _whole((usage or {}).get("completion_tokens"))
    if reply:
        parts.append((_REPLY[0], reply, _REPLY[1]))
    window = _whole(report.tokens.budget) or _whole((report.get("window") or {}).get("tokens"))
    return parts, window


class ContextMeter:
    """`show(turn)` after every story change; nothing shows before the first narration."""

    def __init__(self):
        self.bar = w.HTML()
        self.widget = w.VBox([self.bar], layout=w.Layout(max_width="46em"))
        self.widget.add_class("sw-meter")
        self.used = 0
        self.window = 0

    def show(self, turn, number: int | None = None) -> None:
        report = getattr(turn, "report", None) if turn is not None else None
        if not report:
            self.used = self.window = 0
            self.bar.value = ""
            self.widget.layout.display = "none"
            return
        parts, window = meter_parts(report, getattr(turn, "usage", {}) or {})
        note = _whole((report.get("authors_note") or {}).get("tokens")) if isinstance(report.get("authors_note"),
                                                                                       dict) else 0
        self.used, self.window = sum(n for _, n, _ in parts), window
        self.widget.layout.display = ""
        self.bar.value = meter_html(parts, window, note, number)


def meter_html(parts: list[tuple[str, int, str]], window: int, authors_note: int = 0,
               number: int | None = None) -> Html:
    used = sum(n for _, n, _ in parts)
    scale = max(window, used, 1)
    segments = Html("").join(
        html.tag("span", "", title=f"{words}: {n:,} tokens",
                 style=f"display:inline-block;height:100%;width:{100 * n / scale:.2f}%;background:{colour}")
        for words, n, colour in parts)
    bar = html.tag("div", segments, cls="sw-meter-bar", title="Tokens of the window, by section",
                   style="height:.7em;width:100%;background:#eee;border-radius:3px;overflow:hidden;"
                         "white-space:nowrap;line-height:0")
    share = f" ({100 * used / window:.0f}%)" if window else ""
    of = f" of the {window:,}-token window{share}" if window else ""
    turn = f"Turn {number}: " if number else "Newest turn: "
    legend = " · ".join(f"{words} {n:,}" for words, n, _ in parts)
    note = f" · author's note {authors_note:,} (in the history)" if authors_note else ""
    words = html.tag("div", f"{turn}{used:,} tokens{of}. {legend}{note}",
                     cls="sw-meter-words", style="color:#666;font-size:80%;margin-top:.15em;line-height:1.4")
    return html.tag("div", bar + words, style="margin:.3em 0 .4em 0")
