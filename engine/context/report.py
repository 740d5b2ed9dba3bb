"""The context report: a plain dict (it is stored as JSON with every take)
that also displays itself in a notebook as a readable breakdown."""
from __future__ import annotations

from html import escape

__all__ = ["Report"]

_COLOURS = {"system": "#4c72b0", "story": "#55a868"}


class Report(dict):
    """What one prompt was made of. `dict(report)` is exactly what is stored."""

    def section_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.get("sections", []):
            out[s["name"]] = out.get(s["name"], 0) + s["tokens"]
        return out

    def _repr_html_(self) -> str:
        t = self.get("tokens", {})
        budget = max(1, t.get("budget") or 1)
        bars = "".join(
            f"<div title='{escape(s['name'])}: {s['tokens']} tokens' style='display:inline-block;height:14px;"
            f"width:{100 * s['tokens'] / budget:.2f}%;background:{_COLOURS.get(s['part'], '#999')};"
            "border-right:1px solid white'></div>"
            for s in self.get("sections", []))
        reserve = (t.get("output_reserve", 0) + t.get("safety_reserve", 0)) / budget * 100
        bars += (f"<div title='reply and safety reserve' style='display:inline-block;height:14px;width:{reserve:.2f}%;"
                 "background:#dd8452'></div>")
        rows = "".join(
            f"<tr><td>{escape(s['part'])}</td><td>{escape(s['name'])}</td><td style='text-align:right'>{s['tokens']:,}"
            f"</td><td>{escape(s.get('why', ''))}</td></tr>" for s in self.get("sections", []))
        w = self.get("window", {})
        h = self.get("history", {})
        head = (f"<p>{t.get('total', 0):,} prompt tokens of a {budget:,}-token budget "
                f"(configured {t.get('configured_budget', budget):,}; window {w.get('tokens') or 'unknown'}, "
                f"{'verified' if w.get('verified') else 'not verified'} via {escape(str(w.get('source')))}); "
                f"reply {t.get('output_reserve', 0):,}, safety reserve {t.get('safety_reserve', 0):,}. "
                f"History: {h.get('included', 0)} of {h.get('total', 0)} nodes, floor depth "
                f"{h.get('floor_depth')}, block {h.get('trim_block')}.</p>")
        prompt = self.get("prompt", {})
        raw = (f"<details><summary>The exact prompt</summary><pre style='white-space:pre-wrap'>"
               f"<b>system</b>\n{escape(prompt.get('system', ''))}\n\n<b>story</b>\n{escape(prompt.get('story', ''))}"
               "</pre></details>")
        return (f"<div class='context-report'>{head}<div style='width:100%;background:#eee'>{bars}</div>"
                "<table><tr><th>part</th><th>section</th><th>tokens</th><th>why</th></tr>"
                f"{rows}</table>{raw}</div>")
