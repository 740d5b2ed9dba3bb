"""HTML for notebooks: every string from a model or a reader is escaped.

Narrator and imported text are data. Nothing here ever emits markup that came
from them, so a reply containing <script> or a javascript: link shows as
those characters and does nothing; the output is plain HTML that survives
export where widgets do not render.
"""
from __future__ import annotations

from . import html
from .html import Html

__all__ = ["entries_html", "not_started_html", "save_point_html", "story_html", "text_html", "turn_html"]

_STYLE = {
    "start": "font-style:italic;color:#444",
    "player": "color:#1a4f8b;font-weight:600",
    "direction": "color:#7a5b00;font-style:italic",
    "narrator": "color:inherit",
}
_NOT_STARTED = "The story has not started yet."


def text_html(text: str) -> Html:
    """Escaped text with paragraph breaks kept; never markup from the text."""
    return html.paragraphs(text)


def _entry(entry) -> Html:
    label = html.tag("span", "[direction] ", style="font-size:80%") if entry.kind == "direction" else ""
    takes = (html.tag("span", f" ‹ {entry.take}/{entry.takes} ›", style="font-size:75%;color:#888")
             if entry.takes > 1 else "")
    edited = html.tag("span", " (edited)", style="font-size:75%;color:#888") if entry.edited else ""
    return html.tag("div", label + text_html(entry.text) + takes + edited, cls=f"story-{entry.kind}",
                    style=_STYLE.get(entry.kind, ""))


def entries_html(entries) -> Html:
    return Html("").join(_entry(e) for e in entries)


def not_started_html() -> Html:
    """What an empty story shows, shared with the live widget so both read alike."""
    return html.tag("p", _NOT_STARTED, style="color:#888")


def story_html(title: str, entries, footer: str = "") -> Html:
    body = entries_html(entries) or not_started_html()
    foot = html.tag("div", footer, style="color:#888;font-size:85%") if footer else ""
    head = html.tag("h3", title or "Untitled campaign", style="margin:.2em 0 .6em 0")
    return html.tag("div", head + body + foot, cls="story-workbench-campaign", style="max-width:46em;line-height:1.5")


def turn_html(turn) -> Html:
    lines = Html("")
    if turn.input:
        lines += html.tag("div", text_html(turn.input), style=_STYLE["player"])
    lines += html.tag("div", text_html(turn.text))
    meta = [f"node {turn.id}", f"depth {turn.depth}"]
    if turn.takes > 1:
        meta.append(f"take {turn.take}/{turn.takes}")
    if turn.usage.get("prompt_tokens") is not None:
        meta.append(f"{turn.usage['prompt_tokens']} prompt tokens")
    if turn.report.tokens.estimate is not None:
        meta.append(f"estimate {turn.report.tokens.estimate}")
    lines += html.tag("div", " · ".join(meta), style="color:#888;font-size:80%")
    return html.tag("div", lines, cls="story-workbench-turn", style="max-width:46em")


def save_point_html(sp) -> Html:
    note = html.fragment(" — {}", sp.note) if sp.note else ""
    return html.tag("div", html.fragment("Save point {} at depth {}{}", html.tag("b", sp.name), sp.depth, note))
