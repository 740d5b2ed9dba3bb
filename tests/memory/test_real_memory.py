"""The memory system end to end on the embedded models: SmolLM2 writes the
memories and the summary, MiniLM embeds and recalls them."""
import pytest

from engine import TurnFailed, Workbench
from engine.context import Report

pytestmark = pytest.mark.realmodel
INPUTS = ["walk to the mill", "I ask the miller about the flood", "look at the water wheel", "go to the bridge",
          "I count the sacks of grain", '"Who opened the sluice?"', "follow the tracks in the mud", "climb the weir"]


def test_a_twenty_turn_campaign_remembers_what_left_the_window(tmp_path):
    wb = Workbench.open(tmp_path / "memory.db", background=False)
    # 1,536: at 2,048 the twenty turns (short replies, three-fact memories) could all fit in the window.
    wb.configure(narrator="local", embedder="local", context_budget=1536, max_output_tokens=64)
    camp = wb.new_campaign("Millrace", premise="A flooded mill village.", protagonist="Ada",
                           opening="The river has burst its banks below the mill.")
    for i in range(20):
        for attempt in range(3):  # a reply of nothing but protocol is refused unwritten; press Retry
            try:
                camp.act(INPUTS[i % len(INPUTS)])
                break
            except TurnFailed:
                if attempt == 2:
                    raise
    assert len(camp.memories) >= 4 and camp.summary
    assert set(camp.derived()["status"]) <= {"ok", "idle"}
    report = camp.context("I think back on the flood")
    oldest_in_window = report["history"]["total"] - report["history"]["included"]
    assert oldest_in_window > 6  # the first block has left the window
    used = report["memories"]["used"]
    assert used and any(m["end"] < oldest_in_window for m in used)  # memories, and lines that left the window
    assert "Story summary:" in report["story"] and "Memories from earlier" in report["story"]


def test_a_clue_the_reader_planted_comes_back_once_it_left_a_small_window(tmp_path):
    """The release check M04 in small: the clue is the reader's own line; the
    embedded model narrates around it and writes the memories, the guard and
    the recall must bring it back after it left a 1,536-token window."""
    wb = Workbench.open(tmp_path / "clue.db", background=False)
    wb.configure(narrator="local", embedder="local", context_budget=1536, max_output_tokens=48)
    camp = wb.new_campaign("Gull Point", premise="A lighthouse whose keeper vanished in a storm.",
                           protagonist="Wren", opening="Rain needles the cliff path below the lighthouse.")
    lines = ["walk up the cliff path", "I hide the brass key under the ninth stair of the lighthouse",
             *INPUTS, *INPUTS[:4]]
    # The story is played on until the planted turn has left the window: how
    # soon depends on how long the model's replies run (3 to 40 words here),
    # and 14 turns were once not enough (the whole story still fit).
    more = iter(INPUTS * 2)
    while True:
        for line in lines:
            for attempt in range(3):
                try:
                    camp.act(line)
                    break
                except TurnFailed:
                    if attempt == 2:
                        raise
        report = Report(camp.context("I think about where I hid the brass key"))
        history = report.history_text.lower()
        lines = [next(more, None)]
        if "ninth stair" not in history or lines[0] is None:
            break
    assert "ninth stair" not in history  # the planted turn has left the window
    assert "ninth stair" in report.memories_text.lower()
    assert report["tokens"]["history_spent"] > 200  # and the story was not crowded out to make room for it
