"""The prompt's own section labels said back as story are cleaned at write
time and counted by the leak count: the two replies a player met, exactly."""
from __future__ import annotations

import pytest
from narrators import ScriptedNarrator

from engine import Workbench
from engine.context import builder
from engine.narrative import count_leaks, hold_rules
from engine.narrative.prose import PROMPT_LABELS, RULE_PROMPT_LABEL, echoed_prompt

PREMISE_ECHO = "The story's premise: An old lighthouse whose keeper vanished.\n\nYou climb the stair to the lamp."
CHANGED = "The story's premise has just changed forever. The lamp goes dark and Mara screams."


@pytest.mark.parametrize(("reply", "kept", "removed"), [
    (PREMISE_ECHO, "You climb the stair to the lamp.", "The story's premise: An old lighthouse whose keeper vanished."),
    (CHANGED, "The lamp goes dark and Mara screams.", "The story's premise has just changed forever."),
    ("The story’s premise: An old lighthouse…\nThe wind rises.", "The wind rises.",
     "The story’s premise: An old lighthouse…"),
    ("You wait. Story summary: Wren came to the lighthouse. The door opens.", "You wait. The door opens.",
     "Story summary: Wren came to the lighthouse."),
])
def test_a_label_said_back_is_cut_and_the_story_kept(reply, kept, removed):
    cleaned, cut = echoed_prompt(reply)
    assert cleaned == kept and cut == [removed]
    stored, rules = hold_rules(reply)
    assert stored == kept and rules["prompt_echoes"] == [removed]


@pytest.mark.parametrize("story", [
    "The premise of her story was simple: the keeper never left.",
    "Mara says the story's ending is not written yet.",
    "You read the summary of the ledger: three ships, one wreck.",
])
def test_story_that_only_uses_the_words_is_kept(story):
    assert echoed_prompt(story) == (story, [])


def test_the_labels_are_the_builders_own_words():
    """The copies in engine.narrative.prose start sections the builder really writes."""
    source = open(builder.__file__, encoding="utf-8").read()
    for label in PROMPT_LABELS:
        assert label in source, label


def test_the_leak_count_counts_both_replies_a_player_met():
    counted = count_leaks([(1, PREMISE_ECHO), (2, CHANGED), (3, "The lamp turns.")])
    assert counted["leaking"] == 2 and counted["ids"] == [1, 2]
    assert {e["rule"] for e in counted["examples"]} == {RULE_PROMPT_LABEL}
    only = count_leaks([(4, "The story's premise: An old lighthouse.")])
    assert only["leaking"] == 1


def test_a_played_reply_is_stored_without_the_label(tmp_path):
    wb = Workbench.open(tmp_path / "echo.db", background=False)
    wb.configure(narrator=ScriptedNarrator([CHANGED]), memory_enabled=False, auto_summarize=False, embedder="none")
    camp = wb.new_campaign("Lamp", premise="An old lighthouse whose keeper vanished.", opening="Rain.")
    turn = camp.act("I wait")
    assert turn.text == "The lamp goes dark and Mara screams."
    assert turn.accounting["rules"]["prompt_echoes"] == ["The story's premise has just changed forever."]
    assert count_leaks(camp)["leaking"] == 0
