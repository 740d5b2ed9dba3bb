"""The one place the workbench turns data into HTML for a notebook.

Story text, imported bundles, server answers, file names and stored reports
are all written by someone else, so every value that reaches a view goes
through here and comes out as inert text: a `<script>`, an `onerror=` or a
`javascript:` link shows as those characters and does nothing.

Escaping is MarkupSafe's (the library Jinja escapes with) rather than our own,
because its `Markup` type knows which fragments are already safe: helpers nest
without double escaping, and anything that is not a `Markup` is always
escaped, including arguments to `fragment(...)`. On top of it, characters that
hide or reorder text are shown as their code point: bidi overrides can make a
file name read backwards, NUL and other control characters vanish, and a lone
surrogate cannot be encoded as UTF-8, so a view holding one fails to reach the
browser at all.

Views return `Html` rather than `str` so that one view nests in another (a
report in a widget, the story in the app) without being escaped twice or
trusted by hand. Nowhere else builds markup: tests/security/
test_html_only_through_module.py fails on an f-string, `%`, `.format`, `+` or
`.join` that holds a tag, and on `Html(...)` of a computed value, outside
this file.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from numbers import Real

from markupsafe import Markup
from markupsafe import escape as _escape

__all__ = [
    "Html",
    "bars",
    "bullet_list",
    "count",
    "details",
    "escape",
    "fragment",
    "frame",
    "key_values",
    "paragraphs",
    "pre",
    "table",
    "tag",
    "text",
]

# Bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069); C0
# controls except tab, newline and carriage return; DEL; lone surrogates.
# Zero-width joiners stay: emoji sequences and Persian text need them.
_HIDDEN_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_COLOUR_RE = re.compile(r"#[0-9a-fA-F]{3,8}")
_TAGS = frozenset({"b", "code", "details", "div", "i", "li", "p", "pre", "span", "summary", "table", "tbody",
                   "td", "th", "thead", "tr", "ul", "h3", "h4", "small"})
_FALLBACK_COLOUR = "#999"


def _visible(value: str) -> str:
    return _HIDDEN_RE.sub(lambda m: f"[U+{ord(m.group()):04X}]", value)


class Html(Markup):
    """A fragment that is safe to show; anything joined to it is escaped first.

    Construct it only from literals in the code: `Html(x)` trusts `x`.
    """

    __slots__ = ()

    @classmethod
    def escape(cls, value) -> Html:
        if hasattr(value, "__html__"):
            return cls(value.__html__())
        return cls(_escape(_visible(value if isinstance(value, str) else str(value))))


def text(value) -> Html:
    """Any value as inert text (a `Html` fragment passes through unchanged)."""
    return Html.escape(value)


def escape(value) -> str:
    """`text(value)` as a plain str: what a view shows for `value`, for code that
    checks a view against it. Markup is built with the helpers below, never by
    joining this to tags by hand."""
    return str(text(value))


def fragment(template: str, *args, **kwargs) -> Html:
    """`template` (a literal) with every argument escaped: `fragment("<b>{}</b>", name)`."""
    return Html(template).format(*args, **kwargs)


def tag(name: str, content="", *, style: str = "", title=None, cls: str = "", role: str = "") -> Html:
    """One element; the name is checked, the content and every attribute escaped.

    `role` is there for the widgets' live messages: `alert` and `status` are
    what a screen reader announces without the reader moving to them."""
    if name not in _TAGS:
        raise ValueError(f"engine.html.tag does not build <{name}>: use one of {sorted(_TAGS)}.")
    attributes = Html("").join(
        fragment(" {}='{}'", key, value)
        for key, value in (("class", cls), ("role", role), ("style", style), ("title", title))
        if value not in (None, ""))
    return fragment("<{}{}>{}</{}>", Html(name), attributes, content, Html(name))


def count(value) -> Html:
    """A whole number with thousands separators; anything else as escaped text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Html(f"{value:,}")
    return text(value)


def paragraphs(value: str | None) -> Html:
    """Text split into paragraphs at blank lines, single line breaks kept."""
    parts = [p for p in (value or "").split("\n\n") if p.strip()]
    return Html("").join(
        tag("p", Html("<br>").join(p.split("\n")), style="margin:0 0 .6em 0") for p in parts)


def pre(value, summary=None) -> Html:
    """Preformatted text, wrapped; folded under `summary` when one is given."""
    block = tag("pre", value, style="white-space:pre-wrap")
    return block if summary is None else details(summary, block)


def details(summary, body) -> Html:
    return tag("details", tag("summary", summary) + body)


def table(rows: Iterable[Iterable], header: Iterable = (), *, right: Iterable[int] = ()) -> Html:
    """Rows of cells, each escaped; columns listed in `right` align right (numbers)."""
    right = set(right)
    head = tag("tr", Html("").join(tag("th", h) for h in header)) if header else Html("")
    body = Html("").join(
        tag("tr", Html("").join(
            tag("td", c, style="text-align:right" if i in right else "") for i, c in enumerate(row)))
        for row in rows)
    return tag("table", head + body)


def key_values(pairs: Iterable[tuple]) -> Html:
    """A two-column table, the key as a left-aligned heading."""
    return tag("table", Html("").join(
        tag("tr", tag("th", key, style="text-align:left") + tag("td", value)) for key, value in pairs))


def bullet_list(items: Iterable, heading=None) -> Html:
    """A list of items under an optional bold heading; nothing at all when empty."""
    items = list(items)
    if not items:
        return Html("")
    head = tag("p", tag("b", heading), style="margin:.4em 0 0 0") if heading is not None else Html("")
    return head + tag("ul", Html("").join(tag("li", item) for item in items))


def frame(df, columns: Iterable[str] | None = None) -> Html:
    """A DataFrame as a table, every cell through `text` (pandas' own `to_html`
    escapes markup but leaves bidi overrides and control characters as they are)."""
    shown = df if columns is None else df[list(columns)]
    return table(shown.itertuples(index=False), header=[str(c) for c in shown.columns])


def _amount(value) -> float:
    """A width's share; a crafted string, NaN or infinity counts as nothing."""
    if isinstance(value, Real) and not isinstance(value, bool) and value == value and abs(value) != float("inf"):
        return max(0.0, float(value))
    return 0.0


def bars(segments: Iterable[tuple], total) -> Html:
    """A horizontal stacked bar: (label, amount, colour) per segment, widths as
    shares of `total`; a colour that is not a hex code is replaced by grey."""
    whole = _amount(total) or 1.0
    cells = Html("").join(
        tag("div", "", title=label, style=(
            f"display:inline-block;height:14px;width:{min(100.0, 100 * _amount(amount) / whole):.2f}%;"
            f"background:{colour if isinstance(colour, str) and _COLOUR_RE.fullmatch(colour) else _FALLBACK_COLOUR};"
            "border-right:1px solid white"))
        for label, amount, colour in segments)
    return tag("div", cells, style="width:100%;background:#eee")
