"""What the story's own words name, for the State panel when the narrator
wrote no state: the lighthouse evening that showed "Nothing recorded yet"
over a keeper, Mara, a lamp room and a key."""
from __future__ import annotations

from engine.narrative.from_prose import sketch

EVENING = [
    "Rain needles the cliff path. Above you the lighthouse lamp turns, though no one has climbed the stair.",
    "You climb the stair to the lamp room. The keeper is gone, but Mara waits by the rail.",
    "Mara says the keeper hid a key. You take the brass key from the ledger.",
    "In the lamp room the light sweeps the water. You see a letter on the table and walk to Westhaven.",
]


def test_the_evening_names_a_keeper_mara_a_lamp_room_and_a_key():
    found = sketch(EVENING)
    people = dict(found.people)
    places = dict(found.places)
    things = dict(found.things)
    assert people["Mara"] == 2 and "the keeper" in people
    assert places["the lamp room"] == 2 and "Westhaven" in places and "Westhaven" not in people
    assert "brass key" in things and "letter" in things
    assert found.people[0][0] == "Mara"  # most used first


def test_sentence_openings_and_pronouns_are_not_people():
    found = sketch(["Rain falls. The tide turns. You wait. Suddenly the door opens. Then nothing."])
    assert found.people == [] and not any(name in ("Rain", "The", "You") for name, _ in found.places)


def test_nothing_named_is_an_empty_sketch():
    assert sketch([]).empty and sketch(["it is dark and cold."]).empty
