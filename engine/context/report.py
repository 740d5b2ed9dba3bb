"""The context report: a plain dict (it is stored as JSON with every take)
that also displays itself in a notebook as a readable breakdown."""
from __future__ import annotations

from typing import NamedTuple

from .. import html

__all__ = ["HISTORY_SECTIONS", "MEMORY_SECTIONS", "HistoryFigures", "Narrative", "PromptText", "Report", "Section",
           "Tokens"]

_COLOURS = {"system": "#4c72b0", "story": "#55a868"}
# The sections the story's nodes and the recalled units are shown in (engine.context.builder).
HISTORY_SECTIONS = ("history", "history_recent")
MEMORY_SECTIONS = ("memories", "memories_new")


def _n(value) -> float:
    """A number for widths and sums; anything else (a crafted string) counts as zero."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _d(value) -> dict:
    """A stored part that is not a mapping (a crafted file) renders as empty rather than failing."""
    return value if isinstance(value, dict) else {}


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Tokens(NamedTuple):
    """The prompt's arithmetic: what it was built to and what it came to."""

    budget: int | None
    estimate: int | None
    total: int | None
    configured_budget: int | None
    safety_reserve: int | None
    output_reserve: int | None


class HistoryFigures(NamedTuple):
    included: int | None
    total: int | None
    floor_depth: int | None
    trim_block: int | None


class Section(NamedTuple):
    name: str
    part: str
    tokens: int
    text: str
    why: str


class PromptText(NamedTuple):
    """Exactly what the narrator was sent."""

    system: str
    story: str


class Narrative(NamedTuple):
    """What the turn's state protocol proposed and what was kept."""

    proposed: bool
    accepted: int
    rejected: list
    removals: list
    changes: list


class Report(dict):
    """What one prompt was made of. `dict(report)` is exactly what is stored;
    readers use the typed views below rather than string keys, so a renamed
    key breaks here, once, and not in every reader."""

    @property
    def tokens(self) -> Tokens:
        t = _d(self.get("tokens"))
        return Tokens(_whole(t.get("budget")), _whole(t.get("estimate", self.get("estimate"))), _whole(t.get("total")),
                      _whole(t.get("configured_budget")), _whole(t.get("safety_reserve")),
                      _whole(t.get("output_reserve")))

    @property
    def history(self) -> HistoryFigures:
        h = _d(self.get("history"))
        return HistoryFigures(_whole(h.get("included")), _whole(h.get("total")), _whole(h.get("floor_depth")),
                              _whole(h.get("trim_block")))

    @property
    def sections(self) -> list[Section]:
        raw = self.get("sections")
        return [Section(str(s.get("name", "")), str(s.get("part", "")), _whole(s.get("tokens")) or 0,
                        s.get("text", "") if isinstance(s.get("text"), str) else "",
                        s.get("why", "") if isinstance(s.get("why"), str) else "")
                for s in (raw if isinstance(raw, list) else []) if isinstance(s, dict)]

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    @property
    def history_text(self) -> str:
        """The story's nodes as shown: the history section and the newest
        nodes after the held memories ("history_recent"), without them."""
        return "\n\n".join(s.text for s in self.sections if s.name in HISTORY_SECTIONS and s.text)

    @property
    def memories_text(self) -> str:
        """Every recalled unit shown: the held memories section and this turn's ("memories_new")."""
        return "\n".join(s.text for s in self.sections if s.name in MEMORY_SECTIONS and s.text)

    @property
    def prompt(self) -> PromptText:
        p = _d(self.get("prompt")) or self  # a v2 record kept the two parts at the top level too
        return PromptText(*(v if isinstance(v := p.get(k), str) else "" for k in ("system", "story")))

    @property
    def narrative(self) -> Narrative:
        n = _d(self.get("narrative"))
        return Narrative(bool(n.get("proposed")), _whole(n.get("accepted")) or 0, list(n.get("rejected") or []),
                         list(n.get("removals") or []), list(n.get("changes") or []))

    def used(self, kind: str) -> list[dict]:
        """The items a section kind used: "memories", "knowledge" or "cards"."""
        found = _d(self.get(kind)).get("used")
        return [u for u in found if isinstance(u, dict)] if isinstance(found, list) else []

    def section_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.sections:
            out[s.name] = out.get(s.name, 0) + s.tokens
        return out

    def _repr_html_(self) -> str:
        t, w, h, prompt = (_d(self.get(key)) for key in ("tokens", "window", "history", "prompt"))
        budget = max(1, _n(t.get("budget")) or 1)
        sections = [_d(s) for s in self.get("sections") or [] if isinstance(self.get("sections"), list)]
        reserve = _n(t.get("output_reserve", 0)) + _n(t.get("safety_reserve", 0))
        bars = html.bars([(f"{s.get('name')}: {s.get('tokens')} tokens", s.get("tokens"),
                           _COLOURS.get(str(s.get("part")), "#999")) for s in sections]
                         + [("reply and safety reserve", reserve, "#dd8452")], budget)
        rows = html.table(([s.get("part"), s.get("name"), html.count(s.get("tokens")), s.get("why", "")]
                           for s in sections), header=["part", "section", "tokens", "why"], right=[2])
        head = html.fragment(
            "<p>{} prompt tokens of a {}-token budget (configured {}; window {}, {} via {}); reply {}, safety "
            "reserve {}. History: {} of {} nodes, floor depth {}, block {}.</p>",
            html.count(t.get("total", 0)), html.count(budget), html.count(t.get("configured_budget", budget)),
            w.get("tokens") or "unknown", "verified" if w.get("verified") else "not verified", w.get("source"),
            html.count(t.get("output_reserve", 0)), html.count(t.get("safety_reserve", 0)),
            h.get("included", 0), h.get("total", 0), h.get("floor_depth"), h.get("trim_block"))
        exact = html.fragment("<b>system</b>\n{}\n\n<b>story</b>\n{}", prompt.get("system", ""), prompt.get("story", ""))
        raw = html.details("The exact prompt", html.tag("pre", exact, style="white-space:pre-wrap"))
        return html.tag("div", head + _ratio_line(t, w) + bars + rows + raw, cls="context-report")


def _ratio_line(tokens: dict, window: dict) -> html.Html:
    """The per-model estimate correction, when one is in force (engine.budget.ratios)."""
    ratio = tokens.get("token_ratio")
    if not isinstance(ratio, int | float) or ratio <= 1.0:
        return html.Html("")
    return html.fragment(
        "<p>Estimate corrected for this model's tokenizer: {} cl100k tokens × {} = {} expected by the server "
        "({}).</p>", html.count(tokens.get("estimate_cl100k", 0)), f"{ratio:.3f}", html.count(tokens.get("estimate", 0)),
        window.get("ratio_detail", ""))
