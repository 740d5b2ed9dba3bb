"""Counting a joined text from its parts gives exactly the whole text's count,
so the builder may count a 14k-token history node by node."""
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context import tokens

PIECES = st.sampled_from(list("abcXYZ019 .,;:!?'\"-()[]<>/\\\t\n\r") +
                         ["'s", "'ll", "\n\n", "> You", "```", "  ", "é", "中文", "😀", "’", "\u00a0", "\u2028"])
TEXT = st.lists(PIECES, min_size=1, max_size=24).map("".join)


@settings(max_examples=1500, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8), st.sampled_from(["\n\n", "\n", "\n\n\n"]))
def test_a_joined_count_equals_the_whole_texts_count(parts, sep):
    assert tokens.count_joined(parts, sep) == tokens.count(sep.join(parts))


def test_a_separator_that_is_not_newlines_is_counted_whole():
    parts = ["one", "two"]
    assert tokens.count_joined(parts, " ") == tokens.count("one two")
    assert tokens.count_joined([], "\n\n") == 0


def test_the_builders_total_is_the_count_of_what_it_sends(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from narrators import ScriptedNarrator

    from engine import Workbench

    wb = Workbench.open(tmp_path / "joins.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["Rain. The bells ring twice, then stop!", "  Mara's lantern: lit."]),
                 embedder="none")
    camp = wb.new_campaign("Joins", premise="A port.", protagonist="Ila", opening="Fog.")
    for line in ["I wait", '"Who is there?"', "look at the 3 ships"]:
        camp.act(line)
    report = camp.context("I listen")
    prompt = report["prompt"]
    assert report["tokens"]["total"] == tokens.count(prompt["system"]) + tokens.count(prompt["story"])
    history = next(s for s in report["sections"] if s["name"] == "history")
    assert history["tokens"] == tokens.count(history["text"])
