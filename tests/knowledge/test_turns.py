"""The library through real turns: what the narrator is shown, and the record kept of it."""
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench

BIBLE = ("# The Old Abbey\n\nThe abbey crypt bears a symbol shaped like a broken circle, cut into the keystone "
         "above the crypt stair. Only the abbot holds the crypt key.\n\n# Tide Tables\n\nHigh water at the "
         "harbour falls two hours after moonrise in March.\n")
SECRET = "# Hidden history\n\nThe abbot poisoned the bell-ringer to hide the crypt key.\n"


def setup(db_path):
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=ScriptedNarrator(["You wait."]), embedder=BagOfWordsEmbedder(), memory_enabled=False,
                 auto_summarize=False)
    camp = wb.new_campaign("Abbey", protagonist="Ila", opening="Bells ring over the marsh.")
    return wb, camp


def test_relevant_canon_reaches_the_prompt_framed_as_data_and_is_recorded(db_path):
    wb, camp = setup(db_path)
    camp.knowledge.add("bible.md", BIBLE.encode(), classification="canon")
    camp.knowledge.add("secret.md", SECRET.encode(), classification="canon", visibility="hidden")
    turn = camp.act("I go down the crypt stair and study the broken circle on the keystone")
    report = camp.context("I look for the abbot and the crypt key")
    assert "broken circle" in report["story"] and "untrusted" in report["system"].lower()
    shown = turn.report["knowledge"]
    assert shown and "broken circle" in str(shown)
    # Deleting the source never erases what an old turn was shown.
    source_id = int(camp.knowledge.list().index[0])
    camp.knowledge.delete(source_id)
    assert "broken circle" in str(camp.turn(turn.id).report["knowledge"])


def test_an_off_topic_scene_admits_nothing(db_path):
    wb, camp = setup(db_path)
    camp.knowledge.add("bible.md", BIBLE.encode(), classification="canon")
    report = camp.context("I count my coins and order a bowl of soup at the inn")
    assert "broken circle" not in report["story"]


def test_no_library_costs_nothing_in_the_prompt(db_path):
    wb, camp = setup(db_path)
    report = camp.context("I look around")
    assert report["knowledge"] == {} and "untrusted" not in report["system"].lower()
