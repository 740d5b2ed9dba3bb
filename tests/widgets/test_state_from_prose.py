"""The State panel with a narrator that writes no state (the embedded model):
it shows the people, places and things the prose names, says that is what it
is and why, and gives way to the real state as soon as there is one."""
from __future__ import annotations

from narrators import ScriptedNarrator

from engine import Workbench
from widgets import CampaignApp

REPLIES = ["You climb the stair to the lamp room. The keeper is gone, but Mara waits by the rail.",
           "Mara says the keeper hid a key. You take the brass key from the ledger.",
           "Mara <b>smiles</b> at the <script>alert(1)</script> lamp."]


def _panel(tmp_path, **settings):
    wb = Workbench.open(tmp_path / "state.db", background=False)
    wb.configure(narrator=ScriptedNarrator(REPLIES), memory_enabled=False, auto_summarize=False, embedder="none",
                 **settings)
    camp = wb.new_campaign("Lamp", opening="Rain needles the cliff path.")
    app = CampaignApp(camp, threaded=False)
    return camp, app, app.panel_widgets[[t for t, _ in app.panels].index("State")]


def test_the_panel_shows_what_the_prose_names_and_says_why(tmp_path):
    camp, app, state = _panel(tmp_path)
    assert "Nothing recorded yet" in state.body.value
    for line in ("I climb", "I ask Mara", "I wait"):
        app.send(line)
    state.refresh()
    body = state.body.value
    assert "written no state events" in body and "not the state" in body
    assert "Mara ×" in body and "the keeper" in body and "the lamp room" in body and "brass key" in body
    assert "<script>" not in body and "<b>smiles" not in body


def test_with_the_protocol_off_it_says_so(tmp_path):
    camp, app, state = _panel(tmp_path, state_protocol=False)
    app.send("I climb")
    state.refresh()
    assert "Narrative state is off in Settings" in state.body.value


def test_a_recorded_state_is_shown_instead(tmp_path):
    camp, app, state = _panel(tmp_path)
    app.send("I climb")
    camp.correct({"type": "create_entity", "entity": "mara", "name": "Mara", "entity_type": "character"})
    state.refresh()
    assert "Mara" in state.body.value and "story's own words" not in state.body.value
