"""Every HTML view is inert, whatever the text.

Each hostile payload is pushed through every object that displays itself in
a notebook, and the HTML it produces is parsed: no tag or attribute outside
a small allowlist, no event handler, no link or source, no raw bidi control
or NUL, and valid UTF-8. Each case also checks the payload reached the view
(shown as text), so a view that dropped the value cannot pass by accident.
"""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from hostile import PAYLOADS
from hypothesis import given, settings
from hypothesis import strategies as st
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench
from engine import html as views
from engine.bundle.backup import Backup
from engine.bundle.reports import ExportReport
from engine.context.report import Report
from engine.providers.connection import ConnectionReport
from experiments.ablate import BASELINE, Ablation

TAGS = {"div", "p", "span", "b", "i", "em", "strong", "small", "code", "br", "table", "thead", "tbody", "tr", "td",
        "th", "ul", "li", "pre", "details", "summary", "h3", "h4"}
ATTRIBUTES = {"class", "role", "style", "title", "border", "colspan", "rowspan", "valign", "halign"}
HIDDEN = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\x00"]


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)


def assert_inert(markup: str, payload: str | None) -> None:
    markup.encode("utf-8")  # a lone surrogate would make the view fail to reach the browser
    for char in HIDDEN:
        assert char not in markup, f"raw {char!r} in the view"
    parsed = _Collector()
    parsed.feed(markup)
    parsed.close()
    for tag, attrs in parsed.tags:
        assert tag in TAGS, f"<{tag}> in the view"
        for name, value in attrs:
            assert name in ATTRIBUTES, f"attribute {name}= on <{tag}>"
            if name == "style":  # text in a title is only text; a style can load or run things
                assert "javascript:" not in value.lower() and "url(" not in value.lower() and "expression" not in value
    shown = "".join(parsed.text) + " ".join(v or "" for _, attrs in parsed.tags for _, v in attrs)
    if payload is None:
        return
    marker = _marker(payload)
    assert marker in shown, f"the payload never reached the view ({marker!r})"


def _marker(payload: str) -> str:
    """A piece of the payload that must show as text once made visible."""
    for char in HIDDEN:
        payload = payload.replace(char, f"[U+{ord(char):04X}]")
    return payload[:12]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    wb = Workbench.open(tmp_path_factory.mktemp("views") / "views.db", background=False)
    wb.configure(narrator=ScriptedNarrator(PAYLOADS, reasoning=PAYLOADS[0]), embedder=BagOfWordsEmbedder())
    yield wb
    wb.close()


@pytest.fixture(scope="module")
def played(bench):
    """One campaign per payload, with the payload in every field a view shows."""
    out = {}
    for n, payload in enumerate(PAYLOADS):
        camp = bench.new_campaign(payload, premise=payload, protagonist="Ila", opening=payload)
        turn = camp.act(payload)
        camp.save_point(payload, note=payload)
        camp.memories.add(payload, pinned=True)
        body = payload.replace("\x00", "")  # the library refuses control characters in a file's text
        camp.knowledge.add(f"note-{n}.md", f"# {body}\n\n{body} lantern crypt\n", title=payload, notes=payload,
                           classification="canon", always_include=True)
        out[payload] = (camp, turn)
    return out


def _crafted_bundle(payload: str) -> dict:
    """A native bundle whose stored turn report holds the payload in every field."""
    report = {"tokens": {"total": payload, "budget": payload, "configured_budget": payload,
                         "output_reserve": payload, "safety_reserve": payload, "estimate": payload},
              "window": {"tokens": payload, "source": payload, "verified": payload},
              "history": {"included": payload, "total": payload, "floor_depth": payload, "trim_block": payload},
              "sections": [{"name": payload, "part": payload, "tokens": payload, "why": payload, "text": payload}],
              "prompt": {"system": payload, "story": payload}, "estimate": payload}
    return {"format": "story-workbench-campaign", "version": 1,
            "campaign": {"title": payload}, "head": {"branch": 1, "depth": 1},
            "branches": [{"id": 1, "parent": None, "fork_depth": -1}],
            "nodes": [{"id": 1, "branch": 1, "depth": 0, "kind": "start", "text": payload, "live": True},
                      {"id": 2, "branch": 1, "depth": 1, "parent": 1, "kind": "narrator", "text": payload,
                       "live": True, "record": {"narrator": payload, "report": report, "usage": {}}}]}


VIEWS = {
    "campaign": lambda p, camp, turn, wb: camp._repr_html_(),
    "turn": lambda p, camp, turn, wb: turn._repr_html_(),
    "turn report": lambda p, camp, turn, wb: Report(camp.turn(turn.id).report)._repr_html_(),
    "history entry": lambda p, camp, turn, wb: camp.history()[-1]._repr_html_(),
    "save point": lambda p, camp, turn, wb: camp.save_points()[-1]._repr_html_(),
    "memories": lambda p, camp, turn, wb: camp.memories._repr_html_(),
    "knowledge library": lambda p, camp, turn, wb: camp.knowledge._repr_html_(),
    "knowledge status": lambda p, camp, turn, wb: camp.knowledge.status()._repr_html_(),
    "knowledge selection": lambda p, camp, turn, wb: camp.knowledge.retrieve(
        "lantern crypt", budget_tokens=2000)._repr_html_(),
    "dry-run report": lambda p, camp, turn, wb: Report(camp.context())._repr_html_(),
}


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("view", VIEWS)
def test_played_views_are_inert(played, bench, view, payload):
    camp, turn = played[payload]
    expected = None if view == "knowledge status" else payload  # status: counts and notes only, no titles
    if view == "knowledge selection":
        expected = payload.replace("\x00", "")  # it shows the file's heading, imported without the NUL
    assert_inert(VIEWS[view](payload, camp, turn, bench), expected)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_a_crafted_bundles_stored_report_is_inert(bench, payload):
    """The known hole: imported turn records are kept verbatim, and the report
    view rendered them unescaped (an <img onerror> fired in a real browser)."""
    imported = bench.import_campaign(json.loads(json.dumps(_crafted_bundle(payload))))
    assert_inert(imported._repr_html_(), payload)
    camp = bench.campaign(imported.campaign_id)
    narration = camp.history()[-1]
    assert_inert(Report(camp.turn(narration.id).report)._repr_html_(), payload)
    assert_inert(camp.turn(narration.id)._repr_html_(), payload)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_reports_built_from_outside_values_are_inert(payload):
    connection = ConnectionReport(narrator=payload, endpoint=payload, model=payload, reachable=True,
                                  models=[payload], window={"tokens": payload, "source": payload, "detail": payload},
                                  budget=4096, warning=payload, detail=payload)
    assert_inert(connection._repr_html_(), payload)
    exported = ExportReport(Path("/tmp") / payload.replace("/", "_"), 10, "f", 1, False, 100, {}, payload)
    assert_inert(exported._repr_html_(), payload.replace("/", "_")[:12])
    stored = Backup(Path("/tmp") / payload.replace("/", "_"), 1, __import__("datetime").datetime(2026, 1, 1))
    assert_inert(stored._repr_html_(), payload.replace("/", "_")[:12])


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_an_ablations_tables_are_inert(payload):
    """Replies are model text and variant names can quote a section's name."""
    frame = pd.DataFrame([{"variant": BASELINE, "sample": 1, "reply": payload, "removed_tokens": 0},
                          {"variant": payload, "sample": 1, "reply": payload, "removed_tokens": 3}])
    assert_inert(Ablation(frame, {BASELINE: None, payload: None}, payload)._repr_html_(), payload)


@pytest.mark.parametrize("payload", [*PAYLOADS, "bad\ud800half"], ids=range(len(PAYLOADS) + 1))
def test_the_rendering_module_escapes_every_helper(payload):
    table = views.table([[payload, 1]], header=[payload])
    parts = [views.text(payload), views.escape(payload), views.tag("p", payload, title=payload, role=payload, cls=payload),
             views.fragment("<b>{}</b>", payload), table, views.key_values([(payload, payload)]), views.bullet_list([payload], payload),
             views.pre(payload, payload), views.paragraphs(payload), views.bars([(payload, 5, payload)], payload),
             views.count(payload)]
    for part in parts:
        assert_inert(str(part), payload if "\ud800" not in payload else "bad[U+D800]")


def test_refuses_to_build_a_tag_outside_its_list():
    with pytest.raises(ValueError, match="does not build <script>"):
        views.tag("script", "x")


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=80))
def test_any_text_comes_back_as_the_same_characters_and_nothing_else(value):
    """For any string: no markup survives, and what a browser would show is the
    string itself with only hidden characters replaced by their code point."""
    markup = str(views.tag("p", value, title=value))
    parsed = _Collector()
    parsed.feed(markup)
    parsed.close()
    assert [tag for tag, _ in parsed.tags] == ["p"]
    assert [name for name, _ in parsed.tags[0][1]] == ([] if value == "" else ["title"])
    assert "".join(parsed.text) == views._visible(value)
