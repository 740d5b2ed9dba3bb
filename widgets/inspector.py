"""The context inspector: what the narrator was shown for any turn, and why.

Every narration keeps its report (`camp.turn(id).report`): the sections with
their token costs and the reason each was included, the budget and the
window it was built to, how much history fitted, and the exact prompt. This
panel shows the costs as a bar chart and a table, the limits in words, and
the raw prompt collapsed. The chart is drawn with matplotlib's Agg canvas
into a PNG (no pyplot state, no kernel needed), so it renders headless too.
"""
from __future__ import annotations

import io
import threading

import ipywidgets as w

from engine import Campaign, html
from engine.context import Report
from engine.html import Html

from .common import CELL, TABLE_FRAME
from .runner import describe_error

__all__ = ["ContextInspector", "section_chart", "sections_table", "summary_html"]

_KNOWN = ("name", "tokens", "why")
_PART_COLOURS = {"system": "#4c72b0", "story": "#55a868"}


def _tokens(section) -> int:
    """A section's token count, or 0 for whatever a crafted or damaged stored
    report holds there instead (a bundle's report is kept verbatim)."""
    value = section.get("tokens") if isinstance(section, dict) else None
    return int(value) if isinstance(value, int | float) and value == value and abs(value) < 10**12 else 0


def section_chart(sections: list[dict]) -> bytes:
    """A horizontal bar chart of token cost per section, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [str(s.get("name", "?")) for s in sections]
    costs = [_tokens(s) for s in sections]
    fig = Figure(figsize=(6, 0.45 * len(sections) + 0.9), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colours = [_PART_COLOURS.get(str(s.get("part")), "#4a7fb5") for s in sections]
    bars = ax.barh(range(len(names)), costs[::-1], color=colours[::-1], tick_label=names[::-1])
    ax.bar_label(bars, labels=[f"{c:,}" for c in costs[::-1]], padding=3, fontsize=8)
    ax.set_xlabel("tokens")
    ax.set_title("Prompt sections by token cost", fontsize=10)
    ax.margins(x=0.15)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def sections_table(sections: list[dict], estimate: int | None = None) -> Html:
    """Name, tokens, why, then any further keys a builder adds; a section's own
    text (when the report keeps it) folds away under a "text" toggle. Every
    cell is escaped. With the prompt's `estimate`, a framing row accounts for
    what the sections alone do not (chat template, separators), so the total
    matches the estimate shown above the table."""
    extra = sorted({k for s in sections for k in s} - set(_KNOWN) - {"text"})
    folded = any("text" in s for s in sections)
    columns = (*_KNOWN, *extra, *(("text",) if folded else ()))
    head = html.tag("tr", Html("").join(html.tag("th", c, style="text-align:left;padding-right:1em") for c in columns))
    rows = []
    for s in sections:
        cells = [str(c) for c in (s.get("name", ""), f"{_tokens(s):,}", s.get("why", ""),
                                  *(s.get(k, "") for k in extra))]
        if folded:
            cells.append(html.details("show", html.tag("pre", str(s.get("text", "")),
                                                       style="white-space:pre-wrap;max-width:40em")))
        rows.append(html.tag("tr", Html("").join(
            html.tag("td", c, style=CELL) for c in cells)))
    total = sum(_tokens(s) for s in sections)
    if isinstance(estimate, int) and estimate > total:
        rows.append(_row("framing", f"{estimate - total:,}", "the chat template's role markers and the separators "
                         "between sections, counted in the estimate but in no section"))
        total = estimate
    rows.append(_row(html.tag("b", "total"), html.tag("b", f"{total:,}"), ""))
    return html.tag("div", html.tag("table", html.tag("thead", head) + html.tag("tbody", Html("").join(rows)),
                                    cls="sw-sections", style="word-break:normal"), style=TABLE_FRAME)


def _row(*cells) -> Html:
    return html.tag("tr", Html("").join(html.tag("td", c, style=CELL) for c in cells))


def summary_html(turn, number: int | None = None) -> Html:
    """The limits the prompt was built to, in words. `number` is the turn's
    place on the story being read; a take off that line has none."""
    report = _typed(turn.report)
    tokens, history = report.tokens, report.history
    window = report.get("window") if isinstance(report.get("window"), dict) else {}
    lines = [
        f"Estimate: {_n(tokens.estimate)} tokens sent; the server counted "
        f"{_n(turn.usage.get('prompt_tokens'))} ({turn.accounting.get('status', 'not classified')}).",
        f"Budget: {_n(tokens.budget)} effective of {_n(tokens.configured_budget)} configured, "
        f"less a {_n(tokens.safety_reserve)}-token safety reserve and up to {_n(tokens.output_reserve)} for the reply.",
        f"Window: {_n(window.get('tokens'))} tokens ({window.get('source') or 'unknown source'}; "
        f"{'verified' if window.get('verified') else 'not verified'}"
        f"{'; it caps the budget' if window.get('capped') else ''}).",
        f"History: the newest {_n(history.included)} of {_n(history.total)} story lines.",
        *_rules_lines(turn.accounting.get("rules") if isinstance(turn.accounting.get("rules"), dict) else {}),
    ]
    place = f"Turn {number}" if number else "A turn not on the story being read"
    take = f", take {turn.take} of {turn.takes}" if turn.takes > 1 else ""
    head = f"{place}{take} · narrator {turn.narrator or '?'} · id {turn.id}"
    items = Html("").join(html.tag("li", line) for line in lines)
    return html.tag("div", html.tag("b", head) + html.tag("ul", items, style="margin:.3em 0"))


_SAMPLER_WORDS = {"top_p": "top-p", "min_p": "min-p", "repeat_penalty": "repetition penalty", "stop": "stop strings"}


def _rules_lines(rules: dict) -> list[str]:
    """What the turn sent beyond the prompt and what the narration's rules changed, in words."""
    lines = []
    changed = rules.get("first_person_changes")
    if isinstance(changed, list) and changed:
        words = ", ".join(f"{c.get('was')} → {c.get('now')}" for c in changed[:12] if isinstance(c, dict))
        more = f" and {len(changed) - 12} more" if len(changed) > 12 else ""
        lines.append(f"First person repaired (narration only; speech, links and code as written): {words}{more}.")
    elif rules.get("first_person_repair") is False:
        lines.append("First-person repair: off.")
    chosen = rules.get("sampling")
    if not isinstance(chosen, dict):
        return lines
    if not chosen:
        return [*lines, "Samplers: none set; the narrator's own top-p, min-p, repetition penalty and stops."]
    said = ", ".join(f"{_SAMPLER_WORDS.get(k, k)} {' · '.join(repr(x) for x in v) if isinstance(v, list) else v}"
                     for k, v in chosen.items())
    return [*lines, f"Samplers sent: {said}; the rest the narrator's own."]


def _n(value) -> str:
    return f"{value:,}" if isinstance(value, int) else ("?" if value is None else str(value))


def _typed(report) -> Report:
    """A stored report read through its typed views (a crafted file's may be a bare dict)."""
    return report if isinstance(report, Report) else Report(report if isinstance(report, dict) else {})


def _raw_prompt(report) -> Html:
    report = _typed(report)
    block = "white-space:pre-wrap;font-size:85%;background:#f6f6f6;padding:.5em;max-height:24em;overflow:auto"
    system, story = report.prompt
    return Html("").join(html.tag("b", label) + html.tag("pre", text, style=block)
                         for label, text in (("System", system), ("Story", story)))


class ContextInspector(w.VBox):
    """Pick a narrated turn (the newest by default) and see its context report."""

    def __init__(self, camp: Campaign):
        self.camp = camp
        self.choice = w.Dropdown(description="Turn", options=[], layout=w.Layout(width="36em"))
        self.node = w.Text(description="or id", placeholder="e.g. 14", layout=w.Layout(width="11em"),
                           tooltip="Any narration's id (shown in its summary), on the story being read or not: "
                                   "a take you switched away from, or a line you undid.")
        self.go = w.Button(description="Show", layout=w.Layout(width="auto"))
        self.summary = w.HTML()
        self.chart = w.Image(format="png", layout=w.Layout(max_width="36em"))
        self.table = w.HTML()
        self.raw = w.HTML()
        self.raw_box = w.Accordion(children=[self.raw], titles=("Raw prompt",), selected_index=None)
        self._shown: int | None = None
        self._numbers: dict[int, int] = {}
        self._refreshing = threading.Lock()
        super().__init__([w.HBox([self.choice, self.node, self.go]), self.summary, self.chart, self.table,
                          self.raw_box])
        self.choice.observe(lambda change: self.show(change["new"]), "value")
        self.go.on_click(lambda _: self.show_id(self.node.value) if self.node.value.strip() else
                         self.show(self.choice.value, again=True))
        self.refresh()

    def refresh(self) -> None:
        """List the narrations on the story being read; follow the newest one.

        Serialised: the turn thread and the derived-work thread both refresh,
        and interleaved option and value writes raised "value not found"."""
        with self._refreshing:
            self._refresh()

    def _refresh(self) -> None:
        try:
            narrations = [e for e in self.camp.history() if e.kind == "narrator"]
        except Exception as exc:  # noqa: BLE001 - shown in place
            self.summary.value = html.tag("p", describe_error(exc), style="color:#b00020")
            return
        self._numbers = {e.id: i + 1 for i, e in enumerate(narrations)}
        options = [(_label(i + 1, e), e.id) for i, e in enumerate(narrations)][::-1]
        self.choice.options = options
        if not options:
            self._clear("No narrated turn yet: play one and its context appears here.")
            return
        self.choice.value = options[0][1]
        self.show(options[0][1])

    def show_id(self, typed) -> None:
        """The id typed in the box; anything but a whole number is refused in words."""
        try:
            node_id = int(str(typed).strip())
        except ValueError:
            self._clear(f"“{typed}” is not a turn id: type the number shown after “id” in a turn's summary.",
                        error=True)
            return
        self.show(node_id)

    def show(self, node_id: int | None, again: bool = False) -> None:
        """Show any turn's report, on the story being read or not (Show with
        the id box empty shows the turn picked in the list)."""
        if node_id is None or (node_id == self._shown and not again):
            return
        try:
            turn = self.camp.turn(node_id)
        except Exception as exc:  # noqa: BLE001 - shown in place
            self._clear(describe_error(exc), error=True)
            return
        self._shown = node_id
        report = turn.report
        if not report:
            self._clear(f"Turn {node_id} has no context report (it was written by an edit).")
            return
        # the raw section dicts: the table shows any further key a builder adds
        sections = [s for s in report.get("sections") or [] if isinstance(s, dict)]
        self.summary.value = summary_html(turn, self._numbers.get(node_id))
        self.chart.value = section_chart(sections) if sections else b""
        self.chart.layout.display = "" if sections else "none"
        self.table.value = sections_table(sections, report.tokens.estimate)
        self.raw.value = _raw_prompt(report)

    def _clear(self, message: str, error: bool = False) -> None:
        colour = "#b00020" if error else "#888"
        self.summary.value = html.tag("p", message, style=f"color:{colour}")
        self.chart.value, self.table.value, self.raw.value = b"", "", ""
        self.chart.layout.display = "none"
        self._shown = None


def _label(number: int, entry) -> str:
    words = " ".join(entry.text.split()[:8])
    take = f" · take {entry.take}/{entry.takes}" if entry.takes > 1 else ""
    return f"Turn {number}{take}: {words}…"
