"""The context report: a plain dict (it is stored as JSON with every take)
that also displays itself in a notebook as a readable breakdown."""
from __future__ import annotations

from ..html import escape  # html.escape, plus bidi controls, NUL and lone surrogates shown as code points

__all__ = ["Report"]

_COLOURS = {"system": "#4c72b0", "story": "#55a868"}


def _e(value) -> str:
    """Stored reports come back from imported bundles verbatim, so any field may hold markup."""
    return escape(value)


def _n(value) -> float:
    """A number for widths and sums; anything else (a crafted string) counts as zero."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _d(value) -> dict:
    """A stored part that is not a mapping (a crafted file) renders as empty rather than failing."""
    return value if isinstance(value, dict) else {}


def _c(value) -> str:
    """A count with thousands separators, or the escaped text when it is not a number."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else _e(value)


class Report(dict):
    """What one prompt was made of. `dict(report)` is exactly what is stored."""

    def section_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.get("sections", []):
            out[s["name"]] = out.get(s["name"], 0) + s["tokens"]
        return out

    def _repr_html_(self) -> str:
        t = _d(self.get("tokens"))
        budget = max(1, _n(t.get("budget")) or 1)
        sections = [_d(s) for s in self.get("sections") or [] if isinstance(self.get("sections"), list)]
        bars = "".join(
            f"<div title='{_e(s.get('name'))}: {_e(s.get('tokens'))} tokens' style='display:inline-block;height:14px;"
            f"width:{100 * _n(s.get('tokens')) / budget:.2f}%;background:{_COLOURS.get(str(s.get('part')), '#999')};"
            "border-right:1px solid white'></div>"
            for s in sections)
        reserve = (_n(t.get("output_reserve", 0)) + _n(t.get("safety_reserve", 0))) / budget * 100
        bars += (f"<div title='reply and safety reserve' style='display:inline-block;height:14px;width:{reserve:.2f}%;"
                 "background:#dd8452'></div>")
        rows = "".join(
            f"<tr><td>{_e(s.get('part'))}</td><td>{_e(s.get('name'))}</td><td style='text-align:right'>{_c(s.get('tokens'))}"
            f"</td><td>{_e(s.get('why', ''))}</td></tr>" for s in sections)
        w = _d(self.get("window"))
        h = _d(self.get("history"))
        head = (f"<p>{_c(t.get('total', 0))} prompt tokens of a {_c(budget)}-token budget "
                f"(configured {_c(t.get('configured_budget', budget))}; window {_e(w.get('tokens') or 'unknown')}, "
                f"{'verified' if w.get('verified') else 'not verified'} via {_e(w.get('source'))}); "
                f"reply {_c(t.get('output_reserve', 0))}, safety reserve {_c(t.get('safety_reserve', 0))}. "
                f"History: {_e(h.get('included', 0))} of {_e(h.get('total', 0))} nodes, floor depth "
                f"{_e(h.get('floor_depth'))}, block {_e(h.get('trim_block'))}.</p>")
        head += _ratio_line(t, w)
        prompt = _d(self.get("prompt"))
        raw = (f"<details><summary>The exact prompt</summary><pre style='white-space:pre-wrap'>"
               f"<b>system</b>\n{_e(prompt.get('system', ''))}\n\n<b>story</b>\n{_e(prompt.get('story', ''))}"
               "</pre></details>")
        return (f"<div class='context-report'>{head}<div style='width:100%;background:#eee'>{bars}</div>"
                "<table><tr><th>part</th><th>section</th><th>tokens</th><th>why</th></tr>"
                f"{rows}</table>{raw}</div>")


def _ratio_line(tokens: dict, window: dict) -> str:
    """The per-model estimate correction, when one is in force (engine.providers.accounting)."""
    ratio = tokens.get("token_ratio")
    if not isinstance(ratio, int | float) or ratio <= 1.0:
        return ""
    return (f"<p>Estimate corrected for this model's tokenizer: {_c(tokens.get('estimate_cl100k', 0))} cl100k "
            f"tokens × {_e(f'{ratio:.3f}')} = {_c(tokens.get('estimate', 0))} expected by the server "
            f"({_e(window.get('ratio_detail', ''))}).</p>")
