"""Visual profiles: one table for every entity type, replaced whole, refused
in words, and untouched by any head move (MED-03 to MED-06, LIN-04, LIN-05)."""
from __future__ import annotations

import sqlite3

import pytest
from narrators import ScriptedNarrator
from office import ALICE, OFFICE, block
from sqlalchemy import inspect

from engine import NotFound, Workbench
from engine.media import ProfileError
from engine.media.profiles import MAX_DESCRIPTORS, MAX_FEATURES, MAX_KEY, MAX_STYLE_NOTES, MAX_VALUE
from engine.store.media_tables import VisualProfileRow

EMPTY = {"descriptors": {}, "features": [], "style_notes": ""}


def test_profiles_read_back_exactly_and_are_listed_by_key(office):
    assert office.visual_profile("alice") == ALICE
    assert office.visual_profile("office") == OFFICE
    assert list(office.visual_profiles()) == ["alice", "office"]
    assert office.visual_profiles() == {"alice": ALICE, "office": OFFICE}


def test_no_profile_is_none_and_an_empty_one_is_the_empty_object(office):
    """MED-05."""
    assert office.visual_profile("roger") is None
    assert office.set_visual_profile("roger", {}) == EMPTY
    assert office.visual_profile("roger") == EMPTY
    assert office.scene()["characters"][2]["visual_profile"] == EMPTY


def test_any_entity_type_has_a_profile_in_the_one_table(office, wb):
    """MED-04: the badge is an item; one table, no column saying what kind of entity."""
    office.set_visual_profile("badge", {"material": "white plastic"})
    assert office.scene()["objects"][0]["visual_profile"] == {"descriptors": {"material": "white plastic"},
                                                              "features": [], "style_notes": ""}
    columns = {c["name"] for c in inspect(wb.db.engine).get_columns("visual_profiles")}
    assert columns == {"id", "campaign_id", "entity_key", "descriptors", "features", "style_notes", "created_at",
                       "updated_at"}


def test_a_vehicle_profile_is_a_row_in_the_file(wb, db_path):
    """MED-04 / LIN-06: types are not limited to people, places and items; the row
    is plain JSON in the SQLite file, readable by any tool."""
    events = [{"type": "create_entity", "entity": "ship", "entity_type": "vehicle", "name": "The Persephone"}]
    wb.configure(narrator=ScriptedNarrator([block("A ship docks.", events)]))
    camp = wb.new_campaign("Dock", opening="The harbour.")
    camp.act("watch the water")
    camp.set_visual_profile("ship", {"hull": "pitted white composite"})
    wb.close()
    raw = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    key, descriptors = raw.execute("SELECT entity_key, descriptors FROM visual_profiles").fetchone()
    assert key == "ship" and descriptors == '{"hull": "pitted white composite"}'


def test_setting_replaces_the_whole_profile(office):
    """MED-06: a put replaces, never merges."""
    office.set_visual_profile("alice", {"clothing": "blue coat"})
    assert office.visual_profile("alice") == {"descriptors": {"clothing": "blue coat"}, "features": [],
                                              "style_notes": ""}


def test_deleting_keeps_the_entity_in_the_story_and_the_scene(office):
    """MED-06: delete, then the entity is still there, with no profile."""
    office.delete_visual_profile("alice")
    assert office.visual_profile("alice") is None and "alice" in office.state["entities"]
    assert office.scene()["characters"][1] | {"visual_profile": "gone"} == {
        "key": "alice", "name": "Alice", "type": "character", "status": "active", "description": "",
        "visual_profile": "gone"}
    assert office.scene()["characters"][1]["visual_profile"] is None
    with pytest.raises(NotFound, match="no visual profile for 'alice'"):
        office.delete_visual_profile("alice")


def test_an_unknown_entity_is_refused_with_a_suggestion(office):
    """MED-06: a typo names the key it probably meant; nothing is stored."""
    with pytest.raises(ProfileError) as refused:
        office.set_visual_profile("alicce", {"hair": "red"})
    assert "no entity called 'alicce'" in str(refused.value) and "Did you mean 'alice'?" in str(refused.value)
    assert "alicce" not in office.visual_profiles()


def test_a_display_name_is_not_a_key(office):
    with pytest.raises(ProfileError, match="key in the state, not its display name"):
        office.set_visual_profile("The office", {"lighting": "dim"})


@pytest.mark.parametrize("descriptors, features, style_notes, words", [
    ({"hair": ["short", "black"]}, None, None, "must be words (a string), not a list"),
    ("short black hair", None, None, "mapping of trait to words"),
    (None, "glasses", None, "list of short phrases"),
    (None, None, {"mood": "calm"}, "Style notes are words"),
    ({"hair": "x" * 5_000}, None, None, "5,000 characters long; each value is at most 400"),
    ({" ": "red"}, None, None, "needs a trait name"),
    ({"hair": "a", " hair ": "b"}, None, None, "both called 'hair'"),
    (None, ["glasses", ""], None, "phrase of words"),
    (None, ["x" * (MAX_VALUE + 1)], None, "at most 400"),
    (None, None, "x" * (MAX_STYLE_NOTES + 1), "at most 2,000"),
    ({f"t{i}": "v" for i in range(MAX_DESCRIPTORS + 1)}, None, None, "at most 40 descriptors"),
    (None, [f"f{i}" for i in range(MAX_FEATURES + 1)], None, "at most 40 features"),
])
def test_malformed_or_over_long_profiles_are_refused_in_words(office, descriptors, features, style_notes, words):
    """MED-06; the profile held before is left as it was."""
    with pytest.raises(ProfileError) as refused:
        office.set_visual_profile("alice", descriptors, features, style_notes)
    assert words in str(refused.value)
    assert office.visual_profile("alice") == ALICE


def test_the_bounds_are_the_reference_systems():
    assert (MAX_DESCRIPTORS, MAX_FEATURES, MAX_VALUE, MAX_STYLE_NOTES, MAX_KEY) == (40, 40, 400, 2_000, 200)


def test_values_are_stored_stripped_and_the_limits_themselves_pass(office):
    stored = office.set_visual_profile("roger", {" hair ": " grey "}, [" a scar "], "  ink  ")
    assert stored == {"descriptors": {"hair": "grey"}, "features": ["a scar"], "style_notes": "ink"}
    office.set_visual_profile("roger", {f"t{i}": "v" * MAX_VALUE for i in range(MAX_DESCRIPTORS)},
                              ["f" * MAX_VALUE] * MAX_FEATURES, "s" * MAX_STYLE_NOTES)
    assert len(office.visual_profile("roger")["descriptors"]) == MAX_DESCRIPTORS
    with pytest.raises(ProfileError, match="needs the entity's key"):
        office.set_visual_profile("  ", {})


def test_profiles_hold_across_turns_undo_redo_restore_and_divergence(office, wb, db_path):
    """MED-03 / LIN-04: campaign-scoped, so no head move touches them."""
    def check():
        assert office.visual_profile("alice") == ALICE and office.visual_profile("office") == OFFICE

    early = office.save_point("Before the extra turns")
    for words in ("take notes", "ask a question", "check the clock"):
        office.act(words)
        check()
    office.undo()
    check()
    office.redo()
    check()
    office.restore(early)
    check()
    office.act("leave early")  # a new line from the restored place
    check()
    assert office.scene()["characters"][1]["visual_profile"] == ALICE
    office.retry()  # another take: a branch of its own
    check()
    wb.close()
    with Workbench.open(db_path, background=False) as again:
        assert again.campaign(office.id).visual_profile("alice") == ALICE


def test_a_restore_to_before_the_scene_shows_nobody_but_keeps_the_profiles(office):
    """LIN-04: the scene follows the head; the profile does not."""
    opening = office.history()[0]
    while office.head[1] > opening.depth:
        office.undo()
    assert office.scene()["characters"] == [] and office.visual_profile("alice") == ALICE


def test_profiles_are_not_state_and_have_no_place_in_the_story():
    """LIN-05: no active flag, no branch, no depth: nothing for a head move to change."""
    columns = set(VisualProfileRow.__table__.columns.keys())
    assert not columns & {"active", "branch_id", "depth", "node_id"}


def test_profiles_belong_to_one_campaign(office, wb):
    other = wb.new_campaign("Elsewhere", opening="Another story.")
    assert other.visual_profiles() == {}
    with pytest.raises(ProfileError, match="The story has no entities yet"):
        other.set_visual_profile("alice", {"hair": "red"})
    assert office.visual_profile("alice") == ALICE


def test_a_deleted_campaign_takes_its_profiles_with_it(office, wb):
    raw = sqlite3.connect(wb.db.path)
    raw.execute("PRAGMA foreign_keys = ON")
    raw.execute("DELETE FROM campaigns WHERE id = ?", (office.id,))
    raw.commit()
    assert raw.execute("SELECT count(*) FROM visual_profiles").fetchone()[0] == 0
