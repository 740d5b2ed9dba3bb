"""Save points, panels, the inspector, the static transcript, and markup that stays inert."""
from __future__ import annotations

import time
from types import SimpleNamespace

import ipywidgets as w
import pandas as pd
import pytest
from helpers import texts
from narrators import ScriptedNarrator
from widget_helpers import assert_inert, html_values, markup_in, story

from widgets import CampaignApp, register_panel
from widgets.common import CELL
from widgets.panels import PANELS, StatePanel, placeholder_panel

EVIL = ('<script>alert(1)</script><img src="http://evil.example/x.png" onerror="alert(2)">'
        '<a href="javascript:alert(3)">click</a><iframe src="//evil"></iframe>'
        '<div style="background:url(http://evil/)">x</div> & done')


@pytest.fixture
def app(camp):
    return CampaignApp(camp, threaded=False)


def panel(app, title):
    titles = [t for t, _ in app.panels]
    return app.panel_widgets[titles.index(title)]


# ------------------------------------------------------------------ save points
def test_save_points_create_list_restore_and_delete_with_confirmation(app, camp):
    sp = app.save_points
    assert sp.create.disabled and sp.restore.disabled  # no name, nothing saved yet
    app.send("go in")
    sp.name.value = "at the cave"
    sp.create.click()
    assert [p.name for p in camp.save_points()] == ["at the cave"] and sp.choice.label.startswith("at the cave")
    app.send("go deeper")
    sp.restore.click()
    assert texts(camp)[-1] == "Narration 1." and "Narration 2." not in story(app)
    sp.delete.click()
    assert sp.confirm_row.layout.display == "" and "cannot be undone" in sp.confirm_text.value
    assert len(camp.save_points()) == 1  # asking deletes nothing
    sp.cancel.click()
    assert sp.confirm_row.layout.display == "none" and len(camp.save_points()) == 1
    sp.delete.click()
    sp.confirm.click()
    assert camp.save_points() == [] and sp.choice.options == () and sp.restore.disabled


def test_a_save_point_before_the_story_starts_is_refused_in_words(wb):
    camp = wb.new_campaign("Empty")
    app = CampaignApp(camp, threaded=False)
    app.save_points.name.value = "too soon"
    app.save_points.create.click()
    assert "Nothing to save yet" in app.controls.status.value
    assert "not started yet" in story(app)


# ------------------------------------------------------------------ markup
def test_markup_from_the_narrator_the_reader_and_the_campaign_stays_inert(wb):
    camp = wb.new_campaign(EVIL, premise=EVIL, protagonist="Ila", opening=EVIL)
    wb.configure(narrator=ScriptedNarrator([EVIL], reasoning=EVIL))
    app = CampaignApp(camp, threaded=False)
    live, thoughts = [], []
    app.story.live.observe(lambda ch: live.append(ch["new"]), "value")
    app.story.reasoning.observe(lambda ch: thoughts.append(ch["new"]), "value")
    app.send(EVIL)
    app.controls.direction.value = True
    app.send(EVIL)
    app.save_points.name.value = EVIL
    app.save_points.create.click()
    app.save_points.delete.click()
    app.controls.edit.click()
    app.save_edit(EVIL + " edited")
    panel(app, "Lore").card_title.value = EVIL
    panel(app, "Lore").card_keys.value = EVIL
    panel(app, "Lore").save.click()
    panel(app, "Settings").test.click()
    values = html_values(app) + live + thoughts + [app._repr_html_(), camp._repr_html_()]
    for html in values:
        assert_inert(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in story(app)
    assert any("&lt;script&gt;" in t for t in thoughts)
    assert "&lt;a href" in app._repr_html_()


def test_state_is_shown_as_an_escaped_list(app, camp, wb):
    app.send("look")
    with wb.db.writing() as s:
        from engine.store import CampaignRow

        s.get(CampaignRow, camp.id).state = {"scene": {"place": "<b>cave</b>"}, "items": ["rope", EVIL]}
    app.refresh()
    html = panel(app, "State").body.value
    assert "Nothing recorded yet" in html  # a state of unknown shape shows nothing raw
    with wb.db.writing() as s:
        s.get(CampaignRow, camp.id).state = {
            "entities": {"wren": {"type": "character", "name": EVIL, "location": "cave", "status": "active"},
                         "cave": {"type": "place", "name": "<b>cave</b>"},
                         "rope": {"type": "item", "name": "a rope"}},
            "possessions": {"rope": "wren"}, "facts": [{"predicate": "the lamp is lit", "status": "active"}],
            "threads": {"keeper": {"title": "Where is the keeper?", "status": "open"}},
            "scene": {"summary": "Night", "location": "cave", "present": ["wren"]}}
    app.refresh()
    html = panel(app, "State").body.value
    assert "&lt;b&gt;cave&lt;/b&gt;" in html and "carries a rope" in html and "at &lt;b&gt;cave" in html
    assert "the lamp is lit" in html and "Where is the keeper?" in html and "&lt;script&gt;" in html
    assert_inert(html)


# ------------------------------------------------------------------ panels
def test_default_panels(app, camp):
    assert [t for t, _ in app.panels] == ["Settings", "Lore", "Context", "State", "Memory", "Knowledge"]
    assert isinstance(app.panel_box, w.Accordion) and app.panel_box.selected_index is None
    assert list(app.panel_box.titles) == ["Settings", "Lore", "Context", "State", "Memory", "Knowledge"]
    assert "Nothing recorded yet" in panel(app, "State").body.value
    assert "No story cards yet" in panel(app, "Lore").listing.value
    assert "No memories yet" in panel(app, "Memory").listing.value
    assert "The library is empty" in panel(app, "Knowledge").status.value
    for title in ("Memory", "Knowledge"):  # a fresh campaign: the panels open without an error
        assert panel(app, title).message.value == ""


def test_placeholders_say_not_available_when_the_campaign_lacks_the_attribute():
    bare = SimpleNamespace()
    assert "Memory is not available yet" in placeholder_panel("memories", "Memory")(bare).body.value
    assert "Knowledge is not available yet" in placeholder_panel("knowledge", "Knowledge")(bare).body.value


def test_placeholders_list_what_the_campaign_has_escaped():
    camp = SimpleNamespace(memories=lambda: ["Ila fears the tide.", {"text": "<script>x</script>", "pinned": True}],
                           knowledge=[])
    memory = placeholder_panel("memories", "Memory")(camp)
    assert "<li>Ila fears the tide.</li>" in memory.body.value
    assert "&lt;script&gt;x&lt;/script&gt; (pinned)" in memory.body.value
    assert "No knowledge yet" in placeholder_panel("knowledge", "Knowledge")(camp).body.value
    broken = SimpleNamespace(knowledge=lambda: 1 / 0)
    assert "ZeroDivisionError" in placeholder_panel("knowledge", "Knowledge")(broken).body.value


def test_placeholders_read_tables_and_say_when_they_cannot_list():
    library = SimpleNamespace(list=lambda: pd.DataFrame([{"name": "<b>harbour.md</b>", "chunks": 3}]))
    html = placeholder_panel("knowledge", "Knowledge")(SimpleNamespace(knowledge=library)).body.value
    assert "<li>&lt;b&gt;harbour.md&lt;/b&gt;</li>" in html
    opaque = SimpleNamespace(knowledge=object())
    assert "its panel is not registered yet" in placeholder_panel("knowledge", "Knowledge")(opaque).body.value


class Recorder(w.HTML):
    def __init__(self, camp):
        super().__init__()
        self.camp, self.refreshes, self.app = camp, 0, None

    def refresh(self):
        self.refreshes += 1
        self.value = f"{len(self.camp.history())} passages"

    def attach(self, app):
        self.app = app


def test_panels_are_built_from_title_factory_pairs_and_refreshed(camp):
    def broken(camp):
        raise RuntimeError("no such thing")

    app = CampaignApp(camp, threaded=False, panels=[("Recorder", Recorder), ("Broken", broken)])
    recorder = app.panel_widgets[0]
    assert recorder.app is app and recorder.refreshes == 1
    assert "The Broken panel could not open" in app.panel_widgets[1].value
    app.send("look")
    app.controls.undo.click()
    assert recorder.refreshes == 3 and recorder.value == "1 passages"


def test_register_panel_replaces_by_title_or_appends():
    panels = list(PANELS)
    register_panel("State", Recorder, panels)
    register_panel("Map", Recorder, panels)
    assert [t for t, _ in panels] == ["Settings", "Lore", "Context", "State", "Memory", "Knowledge", "Map"]
    assert panels[3] == ("State", Recorder) and PANELS[3] == ("State", StatePanel)
    assert CampaignApp.panels is PANELS


# ------------------------------------------------------------------ settings
def test_settings_apply_only_what_changed_and_refuse_in_words(app, wb):
    settings = panel(app, "Settings")
    narrator = wb.narrator
    settings.budget.value = 8192
    settings.apply.click()
    assert wb.settings.context_budget == 8192 and wb.narrator is narrator  # the test narrator is kept
    assert "Saved: Story budget." in settings.message.value  # by its label; the name is in the tooltip
    assert "context_budget" not in settings.message.value and "context_budget" in settings.budget.tooltip
    settings.narrator.value = "endpoint"
    settings.endpoint.value = "http://8.8.8.8/v1"  # a public host: refused before any connection
    settings.model.value = "llama3"
    settings.apply.click()
    assert "be used" in settings.message.value and "role='alert'" in settings.message.value
    assert wb.settings.endpoint_url == "" and "color:#b00020" in settings.message.value


def test_a_refused_endpoint_never_traps_the_panel(app, wb):
    """The stuck case: a public endpoint under My server, then back to Embedded: Apply works."""
    settings = panel(app, "Settings")
    settings.narrator.value = "endpoint"
    settings.endpoint.value = "http://8.8.8.8/v1"
    settings.model.value = "llama3"
    settings.apply.click()
    assert "be used" in settings.message.value
    settings.narrator.value = "local"
    assert settings.endpoint.layout.display == "none" and settings.model.layout.display == "none"
    settings.controls["max_output_tokens"].value = 300
    settings.apply.click()
    assert "Saved: Reply length." in settings.message.value and "role='alert'" not in settings.message.value
    assert wb.settings.max_output_tokens == 300 and wb.settings.narrator == "local"
    assert wb.settings.endpoint_url == ""  # the hidden field was not sent


@pytest.mark.parametrize(("name", "typed", "used", "words"), [
    ("temperature", 99.0, 2.0, "Temperature 99 is more than the most it can be (between 0 and 2): 2 was used."),
    ("context_budget", 10, 256, "Story budget 10 is less than the least it can be (between 256 and 1,000,000 "
                                "tokens): 256 was used."),
    ("max_output_tokens", 0, 16, "Reply length 0 is less than the least"),
    ("trim_fraction", 100, 64, "History trim (1/N) 100 is more than the most"),
])
def test_a_value_outside_its_bounds_is_adjusted_with_a_sentence(app, wb, name, typed, used, words):
    settings = panel(app, "Settings")
    settings.controls[name].value = typed
    settings.apply.click()
    assert words in settings.message.value and getattr(wb.settings, name) == used
    assert settings.controls[name].value == used  # the box shows the value used


def test_test_connection_shows_the_report(app):
    settings = panel(app, "Settings")
    settings.test.click()
    assert "reachable" in settings.report.value and "scripted" not in settings.message.value
    assert not settings.test.disabled and not app.controls.continue_.disabled


# ------------------------------------------------------------------ inspector
def test_context_inspector_shows_any_turn(app, camp):
    inspector = panel(app, "Context")
    assert "No narrated turn yet" in inspector.summary.value
    app.send("go in")
    app.send("I wait")
    first, second = [e.id for e in camp.history() if e.kind == "narrator"]
    assert [v for _, v in inspector.choice.options] == [second, first]
    assert inspector.choice.value == second
    report = camp.turn(second).report
    assert f"{report['budget']['effective']:,} effective" in inspector.summary.value
    assert "Turn 2 · narrator" in inspector.summary.value and "depth" not in inspector.summary.value
    assert f"<b>{report['estimate']:,}</b>" in inspector.table.value  # the table adds up to the estimate
    assert f"newest {report['history']['included']} of {report['history']['total']}" in inspector.summary.value
    for section in report["sections"]:
        assert f"<td style='{CELL}'>{section['name']}</td>" in inspector.table.value
    assert inspector.chart.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Narration 1." in inspector.raw.value and inspector.raw_box.selected_index is None
    inspector.choice.value = first
    assert "&gt; You go in." in inspector.raw.value and "I wait" not in inspector.raw.value
    app.controls.retry.click()  # the second turn's first take leaves the story being read...
    assert second not in [v for _, v in inspector.choice.options]
    inspector.node.value = str(second)  # ...and can still be inspected by its id
    inspector.go.click()
    assert f"id {second}" in inspector.summary.value and "not on the story being read" in inspector.summary.value
    inspector.node.value = "second"
    inspector.go.click()
    assert "is not a turn id" in inspector.summary.value
    inspector.node.value = "9999"
    inspector.go.click()
    assert "#b00020" in inspector.summary.value and inspector.table.value == ""


def test_a_branched_turn_has_no_report_and_says_so(app, camp):
    app.send("go in")
    app.controls.edit.click()
    app.story.editor.text.value = "Corrected."
    app.story.editor.branch.click()
    assert "no context report" in panel(app, "Context").summary.value


# ------------------------------------------------------------------ display
def test_the_app_displays_as_a_widget_and_as_a_static_transcript(app, camp):
    app.send("go in")
    bundle = app._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == app.widget.model_id
    assert "&gt; You go in." in bundle["text/html"] and "Narration 1." in bundle["text/html"]
    assert "Static transcript" in bundle["text/html"] and bundle["text/plain"].startswith("<CampaignApp")
    assert app._repr_html_().startswith("<div class='story-workbench-campaign'")
    assert "Narration 1." in camp._repr_html_()


def test_markup_parser_catches_injection():
    """The inertness check itself must fail on real markup."""
    assert "script" in markup_in("<script>x</script>").tags
    with pytest.raises(AssertionError):
        assert_inert("<a href='javascript:x'>y</a>")


def test_panels_are_read_again_when_derived_work_finishes(camp):
    app = CampaignApp(camp, panels=[("Recorder", Recorder)])  # threaded, as in a notebook
    recorder = app.panel_widgets[0]
    app.send("look")
    assert app.wait(10)
    deadline = time.monotonic() + 5
    while recorder.refreshes < 3 and time.monotonic() < deadline:  # opening, the turn, then derived work
        time.sleep(0.02)
    assert recorder.refreshes == 3
