"""The scene packet: a structured, persisted scene a media model can depict
(MED-01, MED-02, MED-07, MED-09), shown as a table in a notebook."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest
from narrators import ScriptedNarrator
from office import ALICE, OFFICE, SUMMARY, block

from engine import Workbench
from engine.media import MediaError, ScenePacket, parse_scene_id, scene_id
from engine.media.scene import MAX_CHARACTERS, MAX_CONSTRAINTS, PACKET_VERSION, packet_of


def names(views) -> list[str]:
    return [v["name"] for v in views]


def test_the_scene_is_persisted_in_the_state_with_where_it_was_set(office, db_path):
    """MED-01: the scene lives in the state document, placed at its node, and a
    second process reading the file sees the same scene."""
    scene = office.state["scene"]
    assert scene["summary"] == SUMMARY and scene["location"] == "office"
    assert sorted(scene["present"]) == ["alice", "bill", "roger"]
    assert isinstance(scene["at"]["branch_id"], int) and scene["at"]["depth"] == office.head[1]
    again = Workbench.open(db_path, background=False)
    try:
        assert again.campaign(office.id).state["scene"] == scene
        assert again.campaign(office.id).scene() == office.scene()
    finally:
        again.close()


def test_the_packet_has_what_a_picture_needs(office):
    """MED-02: location, characters in the story's order, what they carry,
    what happens, and the id of the scene."""
    packet = office.scene()
    assert isinstance(packet, ScenePacket) and isinstance(packet, dict)
    assert packet["location"]["name"] == "The office" and packet["location"]["type"] == "location"
    assert names(packet["characters"]) == ["Bill", "Alice", "Roger"]  # the order set_scene listed them
    assert packet["action_summary"] == SUMMARY
    assert [(o["name"], o["held_by"]) for o in packet["objects"]] == [("Security badge", "bill")]
    assert packet["continuity_constraints"] == ["Bill is carrying Security badge."]
    assert packet["scene_id"] and parse_scene_id(packet["scene_id"])["campaign_id"] == office.id
    assert packet["campaign"] == {"id": office.id, "title": "The office"}
    assert packet["source"] == {"packet_version": PACKET_VERSION, "head_depth": office.head[1]}
    assert packet["ambience"] == {"time_of_day": None, "lighting": None, "mood": None}
    alice = packet["characters"][1]
    assert alice["visual_profile"] == ALICE and packet["location"]["visual_profile"] == OFFICE
    assert packet["characters"][2]["visual_profile"] is None  # Roger has no profile
    assert "John" not in str(packet)  # he exists, but he is not in the scene


def test_the_lineage_names_the_line_the_scene_lies_on(office):
    packet = office.scene()
    branch, depth = office.head
    assert packet["lineage"][0] == {"branch_id": branch, "through_depth": depth}
    assert packet["turn_range"] == {"branch_id": branch, "start": depth, "end": depth}


def test_scene_ids_round_trip_and_anything_else_parses_to_none(office):
    """MED-07: the id's format, its parse, determinism."""
    packet = office.scene()
    span = packet["turn_range"]
    assert packet["scene_id"] == f"c{office.id}:b{span['branch_id']}:{span['start']}-{span['end']}"
    assert parse_scene_id(packet["scene_id"]) == {"campaign_id": office.id, **span}
    assert office.scene()["scene_id"] == packet["scene_id"] and office.scene() == packet
    assert scene_id(3, None, 1, 2) == "c3:b0:1-2"
    for bad in ("", "c1:b1:2", "c1:b1:2-x", "x1:b1:2-3", "c1:b1:2-3 ", "c-1:b1:2-3", None, 7, ["c1:b1:1-2"]):
        assert parse_scene_id(bad) is None, bad


def test_a_depth_range_names_the_scene_and_reversed_ends_are_put_in_order(office):
    """MED-07: range parameters; a reversed range is normalised."""
    packet = office.scene(0, 4)
    assert (packet["turn_range"]["start"], packet["turn_range"]["end"]) == (0, 4)
    assert packet["scene_id"].endswith(":0-4")
    assert office.scene(4, 0)["scene_id"] == packet["scene_id"]
    assert office.scene(start=1)["turn_range"]["end"] == office.head[1]  # to the scene's own depth
    assert office.scene(end=2)["turn_range"] | {"branch_id": None} == {"branch_id": None, "start": 2, "end": 4}


@pytest.mark.parametrize("start, end, words", [
    (True, None, "whole number"), ("2", None, "whole number"), (-1, None, "whole number"),
    (None, 2.5, "whole number"), (0, 99, "ends at depth 4"),
])
def test_a_range_that_is_not_on_the_story_is_refused_in_words(office, start, end, words):
    with pytest.raises(MediaError) as refused:
        office.scene(start, end)
    assert words in str(refused.value)


def test_a_crowd_scene_is_capped_at_24_characters_and_24_constraints(wb):
    """MED-09: 33 present (every one asleep, so each would add a constraint)."""
    crowd = [f"extra-{i}" for i in range(33)]
    events = [{"type": "create_entity", "entity": key, "entity_type": "character", "name": f"Extra {i}",
               "status": "asleep"} for i, key in enumerate(crowd)]
    events += [{"type": "create_entity", "entity": "hall", "entity_type": "location", "name": "The hall"},
               {"type": "set_scene", "summary": "Everyone sleeps in the hall.", "location": "hall",
                "present": crowd}]
    wb.configure(narrator=ScriptedNarrator([block("The hall fills with sleepers.", events)]))
    camp = wb.new_campaign("Crowd", opening="A hall.")
    camp.act("look around")
    assert len(camp.state["scene"]["present"]) == 33  # the precondition: the story holds them all
    packet = camp.scene()
    assert len(packet["characters"]) == MAX_CHARACTERS == 24
    assert names(packet["characters"]) == [f"Extra {i}" for i in range(24)]
    assert len(packet["continuity_constraints"]) == MAX_CONSTRAINTS == 24
    assert packet["continuity_constraints"][0] == "Extra 0 is asleep."


def test_objects_are_what_the_present_hold_or_what_lies_at_the_location(wb):
    events = [
        {"type": "create_entity", "entity": key, "entity_type": kind, "name": name, **extra}
        for key, kind, name, extra in [
            ("mara", "character", "Mara", {"status": "wounded"}), ("ghost", "character", "The ghost", {}),
            ("cellar", "location", "The cellar", {}), ("lamp", "item", "Oil lamp", {}),
            ("coin", "item", "Silver coin", {}), ("crate", "item", "A crate", {}), ("key", "item", "Iron key", {}),
            ("rack", "thing", "Wine rack", {})]
    ] + [
        {"type": "set_possession", "item": "lamp", "owner": "mara"},
        {"type": "set_possession", "item": "coin", "owner": "ghost"},  # the ghost is elsewhere
        {"type": "set_possession", "item": "key", "owner": "cellar"},  # kept by the place itself
        {"type": "set_current_location", "entity": "crate", "location": "cellar"},
        {"type": "set_current_location", "entity": "rack", "location": "cellar"},
        {"type": "set_scene", "summary": "Mara limps into the cellar.", "location": "cellar", "present": ["mara"]},
    ]
    wb.configure(narrator=ScriptedNarrator([block("Down the steps.", events)]))
    camp = wb.new_campaign("Cellar", opening="A stair.")
    camp.act("go down")
    packet = camp.scene()
    assert [(o["name"], o["held_by"]) for o in packet["objects"]] == [
        ("Oil lamp", "mara"), ("Iron key", "cellar"), ("A crate", None), ("Wine rack", None)]
    assert packet["continuity_constraints"] == ["Mara is wounded.", "Mara is carrying Oil lamp."]
    assert packet["characters"][0]["status"] == "wounded"


def test_a_campaign_with_no_scene_yet_gives_an_empty_packet(camp):
    packet = camp.scene()
    assert packet["location"] is None and packet["characters"] == [] and packet["objects"] == []
    assert packet["action_summary"] == "" and packet["continuity_constraints"] == []
    assert parse_scene_id(packet["scene_id"]) == {"campaign_id": camp.id, "branch_id": camp.head[0],
                                                  "start": 0, "end": 0}


def test_the_pure_builder_reads_only_the_document_it_is_given():
    """Plain values in, a packet out; malformed parts of a document read as absent."""
    state = {"entities": {"eve": {"type": "character", "name": "Eve"}, "dock": {"name": "The dock"}},
             "possessions": "not a mapping",
             "scene": {"summary": "Eve waits.", "location": "dock", "present": ["eve", "nobody", 7, "eve"],
                       "time_of_day": "dusk", "lighting": 3, "at": {"branch_id": 1, "depth": 2}}}
    packet = packet_of(5, "Harbour", state, (1, 2), {1: (None, -1)}, {"eve": {"descriptors": {}, "features": [],
                                                                             "style_notes": ""}})
    assert names(packet["characters"]) == ["Eve"] and packet["location"]["type"] == "other"
    assert packet["ambience"] == {"time_of_day": "dusk", "lighting": None, "mood": None}
    assert packet["objects"] == [] and packet["scene_id"] == "c5:b1:2-2"
    assert packet_of(5, "x", "not a state", (None, -1), {}, {})["characters"] == []


class _Markup(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_a_packet_shows_as_a_table_a_person_reads_at_a_glance(office):
    html = office.scene()._repr_html_()
    found = _Markup()
    found.feed(html)
    shown = " ".join(found.text)
    for words in ("The office", "Bill", "Alice", "Roger", SUMMARY, "hair: short black", "tortoiseshell glasses",
                  "no visual profile", "Security badge", "held by Bill", "Bill is carrying Security badge."):
        assert words in shown, words
    assert "table" in found.tags and "script" not in found.tags


def test_names_written_by_the_story_stay_text_in_the_table(wb):
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    events = [{"type": "create_entity", "entity": "eve", "entity_type": "character", "name": hostile},
              {"type": "set_scene", "summary": hostile, "present": ["eve"]}]
    wb.configure(narrator=ScriptedNarrator([block("Eve arrives.", events)]))
    camp = wb.new_campaign("Hostile", opening="A door.")
    camp.act("wait")
    camp.set_visual_profile("eve", {"hair": hostile}, [hostile], hostile)
    found = _Markup()
    found.feed(camp.scene()._repr_html_())
    assert not found.tags & {"img", "script"} and hostile in " ".join(found.text)
