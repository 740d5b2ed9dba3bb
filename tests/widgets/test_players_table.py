"""The player's table without a browser: the keys the page sends, cut replies,
the lore panel and the author's note, the context meter, live views below
the app, the status after every move, and where `make play` keeps its file."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from narrators import ScriptedNarrator
from widget_helpers import assert_inert, story

from widgets import CampaignApp, play_database
from widgets.lore_panel import LorePanel, fired_cards, split_keys
from widgets.meter import meter_parts
from widgets.story_view import Cut, last_sentence_end

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(camp):
    return CampaignApp(camp, threaded=False)


def panel(app, title):
    return app.panel_widgets[[t for t, _ in app.panels].index(title)]


def press(app, action, **content):
    """What widgets/keys.py sends when a key is pressed or a mark clicked in the page."""
    app.keys._received(app.keys, {"action": action, **content}, [])


# ------------------------------------------------------------------ keys
def test_enter_sends_the_text_the_page_had(app, camp):
    press(app, "send", text="I light the lamp")
    assert camp.history()[-2].text == "> I light the lamp." and app.controls.text.value == ""
    assert "Written" in app.controls.status.value


def test_enter_with_story_direction_on_directs(app, camp):
    app.controls.direction.value = True
    press(app, "send", text="Make the storm break")
    assert camp.history()[-2].kind == "direction"


def test_escape_stops_only_a_running_turn_and_unknown_actions_do_nothing(app, camp):
    before = [e.text for e in camp.history()]
    press(app, "stop")  # nothing running: nothing happens, no error
    press(app, "run_python", code="import os")  # not an action the bridge knows
    press(app, "edit", id="not a number")
    assert [e.text for e in camp.history()] == before and "role='alert'" not in app.controls.status.value


def test_the_bridge_sits_inside_the_app_and_listens_for_enter_and_escape(app):
    assert app.keys in app.widget.children
    code = app.keys._esm
    assert '"Enter"' in code and "shiftKey" in code and '"Escape"' in code and ".sw-edit-mark" in code


def test_the_opening_has_no_edit_mark_and_every_line_has_one(app, camp):
    app.send("go in")
    html = story(app)
    assert html.count("sw-edit-mark") == 2  # the line and the narration; the opening is setup
    press(app, "edit", id=camp.history()[0].id)
    assert "cannot be edited" in app.controls.status.value and app.story.editor.widget.layout.display == "none"


# ------------------------------------------------------------------ cut replies
@pytest.fixture
def cutting(wb, camp):
    wb.configure(narrator=ScriptedNarrator(["You climb the stair. The lamp room door is open and the",
                                            "The wind has blown the ledger's pages across the floor."]))
    return CampaignApp(camp, threaded=False)


def test_a_cut_reply_is_marked_and_one_click_finishes_it(cutting, camp):
    app = cutting
    app.send("I climb")
    turn = camp.turn(camp.history()[-1].id)
    assert turn.cut and "sw-cut-mark" in story(app) and "Cut short at the reply length" in story(app)
    assert "door is open and the" not in story(app)  # the view ends at the last complete sentence
    assert "You climb the stair." in story(app)
    assert not app.controls.finish.disabled and app.controls.finish.layout.display == ""
    assert "Finish the reply" in app.controls.status.value
    head = camp.history()[-1]
    app.controls.finish.click()
    assert "sw-cut-mark" not in story(app) and "ledger" in story(app)
    assert app.controls.finish.layout.display == "none"
    # Finished in the same passage, the same take: one message, as SillyTavern's continue.
    after = camp.history()
    assert after[-1].id == head.id and len(after) == 3 and (after[-1].take, after[-1].takes) == (1, 1)
    # A narrator that cannot write on from the cut words is shown the passage to its last whole sentence.
    assert after[-1].text == "You climb the stair. The wind has blown the ledger's pages across the floor."
    assert story(app).count("sw-passage ") == 3


def test_continue_writes_on_in_the_newest_passage(cutting, camp):
    cutting.send("I climb")
    cutting.controls.finish.click()
    head = camp.history()[-1]
    cutting.controls.continue_.click()
    assert camp.history()[-1].id == head.id and len(camp.history()) == 3
    assert [r.reason for r in camp.revisions(head.id)[:-1]] == ["continued", "continued"]


def test_the_editor_of_a_cut_reply_holds_its_whole_text(cutting, camp):
    cutting.send("I climb")
    cutting.controls.edit.click()
    head = camp.turn(camp.history()[-1].id)
    assert cutting.story.editor.text.value == head.text + " " + head.tail


@pytest.mark.parametrize(("text", "shown"), [
    ("You wait. The door", "You wait."),
    ('"Run!" she says. And then', '"Run!" she says.'),
    ("No stop at all", "No stop at all"),
    ("It ends… and the", "It ends…"),
])
def test_a_cut_shows_the_last_complete_sentence(text, shown):
    assert Cut.of(1, text).shown == shown
    assert Cut.of(1, text).shown + Cut.of(1, text).tail == text
    assert last_sentence_end("") == 0


def test_a_cut_the_engine_already_trimmed_is_shown_as_stored():
    assert Cut.of(1, "You wait.", tail=" The door").shown == "You wait."
    assert Cut.of(1, "You wait. The door", tail=" The door").shown == "You wait."


# ------------------------------------------------------------------ status after every move
def test_the_status_says_what_undo_redo_and_a_take_switch_did(app, camp):
    app.send("go in")
    app.retry()
    app.select_take(1)
    assert "Showing take 1 of 2" in app.controls.status.value
    app.undo()
    assert "Stepped back one turn" in app.controls.status.value
    app.redo()
    assert "Stepped forward" in app.controls.status.value


def test_a_save_point_is_confirmed_in_plain_words(app):
    app.send("go in")
    app.save_points.name.value = "before the stair"
    app.save_points.create.click()
    status = app.controls.status.value
    assert "Save point “before the stair” made" in status and "Saved point" not in status
    assert app.save_points.choice.layout.min_width == "24em"  # room for "· saved 01 Dec 22:54"


def test_no_emoji_this_machine_cannot_draw(app):
    memory = panel(app, "Memory")
    assert "📌" not in memory.pin.description
    assert all("📌" not in v for v in (memory.listing.value, story(app)))


# ------------------------------------------------------------------ the lore panel
def test_a_card_is_added_searched_edited_fired_and_deleted(app, camp):
    lore = panel(app, "Lore")
    lore.card_title.value = "Mara"
    lore.card_keys.value = "Mara, innkeeper"
    lore.text.value = "Mara keeps the Lantern Inn and owes Ila a favour."
    lore.save.click()
    cards = camp.story_cards()
    assert list(cards["title"]) == ["Mara"] and list(cards["keys"].iloc[0]) == ["Mara", "innkeeper"]
    assert "added" in lore.message.value and lore.choice.label.startswith("Mara")
    app.send("I ask Mara about the key")
    assert "✦ fired" in lore.listing.value and "Mara in input" in lore.listing.value
    report = camp.turn(camp.history()[-1].id).report
    assert "Mara keeps the Lantern Inn" in report["prompt"]["story"] + report["prompt"]["system"]
    lore.search.value = "nobody"
    assert "No card matches" in lore.listing.value
    lore.search.value = "lantern"
    assert "Mara" in lore.listing.value
    lore.constant.value = True
    lore.save.click()
    assert bool(camp.story_cards()["constant"].iloc[0]) and "always" in lore.listing.value
    lore.delete.click()
    lore.confirm.yes.click()
    assert camp.story_cards().empty and "No story cards yet" in lore.listing.value


def test_a_refused_card_is_said_in_words(app, camp):
    lore = panel(app, "Lore")
    lore.save.click()  # no title, no text
    assert "role='alert'" in lore.message.value and camp.story_cards().empty


def test_unusable_keys_show_when_the_cards_name_them(camp):
    class WithUnusable:
        """The campaign's cards with the column the issue-29 work adds."""

        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def story_cards(self):
            frame = self.real.story_cards()
            frame["unusable_keys"] = [["a"] for _ in range(len(frame))]
            return frame

    camp.add_story_card(title="Vowel", keys=["a", "anchor"], entry="A card with a key too short to fire.")
    lore = LorePanel(WithUnusable(camp))
    assert "keys that never fire" in lore.listing.value


def test_fired_cards_are_read_from_the_report():
    class Turn:
        report = {"knowledge": {"cards_fired": [{"card_id": 3, "found_in": "story", "key": "Mara"},
                                                {"card_id": 4, "found_in": "always", "key": ""}, "junk"]}}

    assert fired_cards(Turn()) == {3: "Mara in story", 4: "always"}
    assert fired_cards(None) == {} and split_keys(" a, ,b ,") == ["a", "b"]


def test_the_authors_note_is_saved_placed_near_the_end_and_counted(app, camp):
    lore = panel(app, "Lore")
    lore.note.value = "Keep the tone grim."
    assert "tokens on every turn" in lore.note_words.value
    lore.save_note.click()
    assert camp.authors_note == "Keep the tone grim." and "next turn" in lore.note_message.value
    app.send("go in")
    report = camp.turn(camp.history()[-1].id).report
    assert "[Author's note: Keep the tone grim.]" in report["prompt"]["story"]
    assert report["authors_note"]["tokens"] > 0
    assert "author&#39;s note" in app.meter.bar.value
    lore.note.value = "x" * 1200
    lore.save_note.click()
    assert "role='alert'" in lore.note_message.value and camp.authors_note == "Keep the tone grim."


# ------------------------------------------------------------------ the context meter
def test_the_meter_shows_the_newest_turn_by_section_and_follows_each_turn(app, camp, wb):
    assert app.meter.widget.layout.display == "none"  # nothing narrated yet
    app.send("go in")
    first = app.meter.used
    report = camp.turn(camp.history()[-1].id).report
    assert first > 0 and app.meter.window == report["tokens"]["budget"]
    assert "story history" in app.meter.bar.value and "rules and setup" in app.meter.bar.value
    app.send("go deeper and look at every wall of the cave for a long while")
    assert app.meter.used > first and "Turn 2" in app.meter.bar.value
    assert_inert(app.meter.bar.value)


def test_meter_parts_group_sections_as_the_records_do():
    report = {"sections": [{"name": "narrator_rules", "tokens": 100}, {"name": "history", "tokens": 50},
                           {"name": "input", "tokens": 5}, {"name": "mystery", "tokens": 7},
                           {"name": "memories", "tokens": "lots"}], "tokens": {"budget": 4096}}
    parts, window = meter_parts(report, {"completion_tokens": 40})
    assert [(w, n) for w, n, _ in parts] == [("rules and setup", 100), ("story history", 55), ("other", 7),
                                             ("reply", 40)]
    assert window == 4096 and meter_parts({}, None) == ([], 0)


# ------------------------------------------------------------------ live views below the app
def test_views_below_the_app_follow_every_turn(app, camp):
    story_view, records = app.transcript(), app.records_view()
    assert "No narrated turn yet" in records.widget.value
    app.send("go in")
    assert "&gt; You go in." in story_view.widget.value and "Narration 1." in story_view.widget.value
    assert "sw-records" in records.widget.value and "go in" in records.widget.value
    bundle = story_view._repr_mimebundle_()
    assert "Narration 1." in bundle["text/html"]  # a saved notebook shows the story as it was
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == story_view.widget.model_id


# ------------------------------------------------------------------ where make play keeps its file
def test_the_play_database_lives_outside_the_project(monkeypatch, tmp_path):
    monkeypatch.delenv("STORY_WORKBENCH_PLAY_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert play_database() == str(tmp_path / "data" / "story-workbench" / "play.db")
    assert (tmp_path / "data" / "story-workbench").is_dir()
    monkeypatch.setenv("STORY_WORKBENCH_PLAY_DB", str(tmp_path / "mine.db"))
    assert play_database() == str(tmp_path / "mine.db")


def _play_script():
    spec = importlib.util.spec_from_file_location("play_script", ROOT / "scripts" / "play.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_old_play_db_beside_the_notebooks_is_moved_once(tmp_path):
    play = _play_script()
    old = tmp_path / "notebooks" / "play.db"
    old.parent.mkdir()
    for suffix in ("", "-wal"):
        Path(str(old) + suffix).write_text("campaign" + suffix)
    target = tmp_path / "data" / "play.db"
    assert play.move_old_database(target, old)
    assert target.read_text() == "campaign" and Path(str(target) + "-wal").read_text() == "campaign-wal"
    assert not old.exists() and not Path(str(old) + "-wal").exists()
    old.write_text("another")
    assert not play.move_old_database(target, old) and target.read_text() == "campaign"  # never overwritten


def test_the_play_notebook_reads_the_players_file_and_keeps_the_panel_settings():
    import json

    cells = ["".join(c["source"]) for c in json.loads((ROOT / "notebooks" / "play.ipynb").read_text())["cells"]]
    code = "\n".join(cells)
    assert 'db_path = ""' in code and "play_database()" in code and "narrator = None" in code
    assert "app.transcript()" in code and "app.records_view()" in code
    assert "Run All" in cells[0] and "Reloaded" in cells[0]


def test_show_with_the_id_box_empty_shows_the_turn_picked_in_the_list(app, camp):
    """It answered '“” is not a turn id' before."""
    app.send("go in")
    app.send("go deeper")
    inspector = panel(app, "Context")
    first = [e for e in camp.history() if e.kind == "narrator"][0]
    inspector.choice.value = first.id
    inspector.summary.value = ""
    inspector.go.click()
    assert "not a turn id" not in inspector.summary.value and f"id {first.id}" in inspector.summary.value


def test_a_note_being_typed_survives_a_turn(app, camp):
    lore = panel(app, "Lore")
    lore.note.value = "Half a thought"
    app.send("go in")  # every panel refreshes after a turn
    assert lore.note.value == "Half a thought" and camp.authors_note == ""
