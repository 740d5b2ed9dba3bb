"""The context report: a plain dict (it is stored as JSON with every take)
that also displays itself in a notebook as a readable breakdown."""
from __future__ import annotations

from .. import html

__all__ = ["Report"]

_COLOURS = {"system": "#4c72b0", "story": "#55a868"}


def _n(value) -> float:
    """A number for widths and sums; anything else (a crafted string) counts as zero."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _d(value) -> dict:
    """A stored part that is not a mapping (a crafted file) renders as empty rather than failing."""
    return value if isinstance(value, dict) else {}


class Report(dict):
    """What one prompt was made of. `dict(report)` is exactly what is stored."""

    def section_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.get("sections", []):
            out[s["name"]] = out.get(s["name"], 0) + s["tokens"]
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
    """The per-model estimate correction, when one is in force (engine.providers.accounting)."""
    ratio = tokens.get("token_ratio")
    if not isinstance(ratio, int | float) or ratio <= 1.0:
        return html.Html("")
    return html.fragment(
        "<p>Estimate corrected for this model's tokenizer: {} cl100k tokens × {} = {} expected by the server "
        "({}).</p>", html.count(tokens.get("estimate_cl100k", 0)), f"{ratio:.3f}", html.count(tokens.get("estimate", 0)),
        window.get("ratio_detail", ""))
