"""HTML for notebooks: every string from a model or a reader is escaped.

Narrator and imported text are data. Nothing here ever emits markup that came
from them, so a reply containing <script> or a javascript: link shows as
those characters and does nothing; the output is plain HTML that survives
export where widgets do not render.
"""
from __future__ import annotations

from .html import escape  # html.escape, plus bidi controls, NUL and lone surrogates shown as code points

__all__ = ["entries_html", "save_point_html", "story_html", "text_html", "turn_html"]

_STYLE = {
    "start": "font-style:italic;color:#444",
    "player": "color:#1a4f8b;font-weight:600",
    "direction": "color:#7a5b00;font-style:italic",
    "narrator": "color:inherit",
}


def text_html(text: str) -> str:
    """Escaped text with paragraph breaks kept; never markup from the text."""
    paragraphs = [p for p in (text or "").split("\n\n") if p.strip()]
    return "".join(
        f"<p style='margin:0 0 .6em 0'>{escape(p).replace(chr(10), '<br>')}</p>" for p in paragraphs
    )


def _entry(entry) -> str:
    label = ""
    if entry.kind == "direction":
        label = "<span style='font-size:80%'>[direction] </span>"
    takes = (
        f"<span style='font-size:75%;color:#888'> ‹ {entry.take}/{entry.takes} ›</span>"
        if entry.takes > 1
        else ""
    )
    edited = "<span style='font-size:75%;color:#888'> (edited)</span>" if entry.edited else ""
    return (
        f"<div class='story-{escape(entry.kind)}' style='{_STYLE.get(entry.kind, '')}'>"
        f"{label}{text_html(entry.text)}{takes}{edited}</div>"
    )


def entries_html(entries) -> str:
    return "".join(_entry(e) for e in entries)


def story_html(title: str, entries, footer: str = "") -> str:
    body = entries_html(entries) or "<p style='color:#888'>The story has not started yet.</p>"
    foot = f"<div style='color:#888;font-size:85%'>{escape(footer)}</div>" if footer else ""
    return (
        "<div class='story-workbench-campaign' style='max-width:46em;line-height:1.5'>"
        f"<h3 style='margin:.2em 0 .6em 0'>{escape(title or 'Untitled campaign')}</h3>"
        f"{body}{foot}</div>"
    )


def turn_html(turn) -> str:
    lines = []
    if turn.input:
        lines.append(f"<div style='{_STYLE['player']}'>{text_html(turn.input)}</div>")
    lines.append(f"<div>{text_html(turn.text)}</div>")
    meta = [f"node {turn.id}", f"depth {turn.depth}"]
    if turn.takes > 1:
        meta.append(f"take {turn.take}/{turn.takes}")
    if turn.usage.get("prompt_tokens") is not None:
        meta.append(f"{turn.usage['prompt_tokens']} prompt tokens")
    if turn.report.get("estimate") is not None:
        meta.append(f"estimate {turn.report['estimate']}")
    lines.append(f"<div style='color:#888;font-size:80%'>{escape(' · '.join(meta))}</div>")
    return "<div class='story-workbench-turn' style='max-width:46em'>" + "".join(lines) + "</div>"


def save_point_html(sp) -> str:
    note = f" — {escape(sp.note)}" if sp.note else ""
    return f"<div>Save point <b>{escape(sp.name)}</b> at depth {sp.depth}{note}</div>"
