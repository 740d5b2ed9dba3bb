"""Recall hears the reader: the line is one query part of its own, each
memory keeps its best match over the parts, and the line's rare words count."""
import pytest
from narrators import ScriptedNarrator

from engine import Workbench
from engine.memory.recall import query_parts, terms

FILLER = ["The river runs brown under the bridge, and a miller sells bread by the water.",
          "Bread and river fish are for sale at the stalls; the river is high after the rain.",
          "You walk along the river bank past the bakery, smelling fresh bread."]
BANK = ["Wren bought bread by the river at Millbridge.", "The river flooded the bakery's cellar in the spring.",
        "Wren watched the river boats unload sacks of bread flour.", "A baker by the river gave Wren a warm loaf.",
        "The river market sells bread, eels and rope.", "Wren crossed the river twice looking for bread.",
        "The old duke was poisoned with nightshade by his own steward, Corvin Marsh.",
        "The ferryman at Ashwater is a one-eyed man called Pell."]


def test_the_readers_line_is_the_first_part_and_weighs_most():
    parts = query_parts("I ask about the duke.", ["older", "newer"])
    assert [p for p, _ in parts] == ["I ask about the duke.", "newer", "older"]
    assert parts[0][1] == 1.0 and all(w < 1.0 for _, w in parts[1:])


def test_terms_drop_function_words_and_stem():
    assert terms("I walk down to the ferries at Ashwater.") == {"walk", "ferry", "ashwater"}


def bank(db_path, embedder):
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=ScriptedNarrator(FILLER), embedder=embedder, auto_summarize=False,
                 memory_top_k=3)
    camp = wb.new_campaign("Millbridge", protagonist="Wren", opening="Rain over Millbridge.")
    camp.act("look around")
    for text in BANK:
        camp.memories.add(text)
    for line in ["walk by the river", "buy some bread", "watch the river"]:
        camp.act(line)  # derived work embeds the bank; the newest story is all rivers and bread
    return wb, camp


def used(camp, line):
    return [m["text"] for m in camp.context(line)["memories"]["used"]]


@pytest.mark.realmodel
def test_the_probe_recalls_its_fact_after_a_story_of_other_things(db_path):
    wb, camp = bank(db_path, "local")
    assert used(camp, "I ask the archivist again how the old duke died.")[0] == BANK[6]
    assert used(camp, "I walk down to the ferry at Ashwater.")[0] == BANK[7]
    report = camp.context("I walk down to the ferry at Ashwater.")["memories"]
    assert report["parts"] == 5 and report["used"][0]["lexical"] > 0


@pytest.mark.realmodel
def test_a_continue_is_still_recalled_by_the_story(db_path):
    wb, camp = bank(db_path, "local")
    recalled = [m["text"] for m in camp.context()["memories"]["used"]]
    assert recalled and all("river" in m or "bread" in m for m in recalled)
