"""The first-person repair changes the narrator's own narration only: speech
after a colon or a speech verb, quoted speech, link text and code keep their
"I"; the turn's record names each change, and a setting turns it off."""
from __future__ import annotations

import pytest
from narrators import ScriptedNarrator

from engine import Workbench
from engine.narrative import hold_rules
from engine.narrative.prose import first_person, second_person


@pytest.mark.parametrize("text", [
    "The old man says: I have seen the black ship.",
    "[click me]",
    "She whispers that I am late, and leaves.",
    'He shouts, "I will not go back!"',
    "The sign reads: I AM THE LAW.",
    "Type `I am here` at the prompt.",
])
def test_speech_links_and_code_are_left_as_written(text):
    assert second_person(text) == text
    assert not first_person(text)


def test_narration_is_repaired_around_speech_it_leaves_alone():
    text = "I climb the stair with my lamp. The old man says: I have seen the black ship. I open [click me]."
    assert second_person(text) == ("You climb the stair with your lamp. The old man says: I have seen the black "
                                    "ship. You open [click me].")


def test_the_record_names_what_changed():
    stored, rules = hold_rules("I climb the stair with my lamp. The old man says: I have seen the black ship.")
    assert stored == "You climb the stair with your lamp. The old man says: I have seen the black ship."
    assert rules["first_person_repaired"]
    assert sorted((c["was"], c["now"]) for c in rules["first_person_changes"]) == [("I", "you"), ("my", "your")]


def _turn(tmp_path, reply, **settings):
    wb = Workbench.open(tmp_path / "person.db", background=False)
    wb.configure(narrator=ScriptedNarrator([reply]), memory_enabled=False, auto_summarize=False, embedder="none",
                 **settings)
    return wb.new_campaign("Lamp", opening="Rain.").act("I wait")


def test_a_played_turn_keeps_reported_speech_and_link_text(tmp_path):
    turn = _turn(tmp_path, "I wait by the door. The old man says: I have seen the black ship. Then [click me].")
    assert turn.text == "You wait by the door. The old man says: I have seen the black ship. Then [click me]."
    assert turn.accounting["rules"]["first_person_changes"] == [{"was": "I", "now": "you"}]


def test_a_setting_turns_the_repair_off(tmp_path):
    turn = _turn(tmp_path, "I wait by the door and count my coins.", first_person_repair=False)
    assert turn.text == "I wait by the door and count my coins."
    assert not turn.accounting["rules"]["first_person_repaired"]
    assert turn.accounting["rules"]["first_person_repair"] is False
