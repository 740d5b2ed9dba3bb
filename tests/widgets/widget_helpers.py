"""Helpers for the headless widget tests: walk an app's widget tree and read
what a browser would be sent."""
from __future__ import annotations

from html.parser import HTMLParser

import ipywidgets as w

from widgets import CampaignApp

# Every tag the app itself writes. Narrator or reader text that produced any
# other tag (script, img, a, iframe...) would be markup injection.
ALLOWED_TAGS = {"div", "p", "span", "br", "b", "i", "code", "ul", "li", "h3", "table", "thead", "tbody", "tr",
                "th", "td", "pre", "details", "summary"}
# title: the Edit marks' and the context meter's tooltips (escaped like every attribute).
ALLOWED_ATTRS = {"style", "class", "role", "title"}


def walk(widget):
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from walk(child)


def html_values(app: CampaignApp) -> list[str]:
    return [x.value for x in walk(app.widget) if isinstance(x, w.HTML | w.HTMLMath)]


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.attr_values: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            self.attrs.add(name)
            self.attr_values.append(value or "")


def markup_in(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser


def assert_inert(html: str) -> None:
    """Only the app's own tags and attributes: no script, image, link or handler."""
    found = markup_in(html)
    assert found.tags <= ALLOWED_TAGS, found.tags - ALLOWED_TAGS
    assert found.attrs <= ALLOWED_ATTRS, found.attrs - ALLOWED_ATTRS
    assert not any("javascript:" in v.lower() or "url(" in v.lower() for v in found.attr_values)


def enabled(app: CampaignApp) -> dict[str, bool]:
    c = app.controls
    buttons = {"send": c.send, "continue": c.continue_, "undo": c.undo, "redo": c.redo, "retry": c.retry,
               "edit": c.edit, "stop": c.stop}
    return {name: not b.disabled for name, b in buttons.items()}


def story(app: CampaignApp) -> str:
    return app.story.passages.value
