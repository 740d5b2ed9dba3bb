"""Recall into the prompt: similarity, pins, near-duplicates, use counts, locks."""
import sqlite3

import pytest
from narrators import BagOfWordsEmbedder, FailingNarrator, ScriptedNarrator, TaskNarrator
from sqlalchemy import select

from engine import TurnFailed, Workbench
from engine.store.memory_tables import MemoryRow
from engine.vectors import QUERIES

FILLER = "The road runs on under a grey sky. " * 60
SECRET = "Aldric hid the ledger beneath the third flagstone."


@pytest.fixture
def play(db_path):
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=TaskNarrator(), embedder=BagOfWordsEmbedder(), auto_summarize=False, context_budget=4000, max_output_tokens=400, memory_top_k=3)
    camp = wb.new_campaign("Road", protagonist="Aldric", opening="The road forks at the Crooked Lantern.")
    yield wb, camp
    wb.close()


def used(report):
    """The memories a prompt carried (recalled lines keep their text in the section only)."""
    return [m["text"] for m in report["memories"]["used"] if m.get("unit", "memory") == "memory"]


def test_a_memory_that_scrolled_out_is_recalled_into_the_prompt(play):
    wb, camp = play
    camp.act("look around")
    camp.memories.add(SECRET)
    camp.act("wait")  # derived work embeds it
    for i in range(22):
        camp.act(f"[{i}] {FILLER}")
    camp.act("search the ledger under the flagstone")
    report = camp.context("I lift the third flagstone and look for the ledger")
    history = next(s["text"] for s in report["sections"] if s["name"] == "history")
    assert "third flagstone" not in history.replace("I lift the third flagstone", "")
    assert SECRET in report["story"] and SECRET in used(report)
    assert report["history"]["included"] < report["history"]["total"]
    entry = next(m for m in report["memories"]["used"] if m.get("unit", "memory") == "memory")
    assert entry["similarity"] > 0 and entry["source"]["depth"] is not None


def test_inferred_memories_are_marked(play):
    wb, camp = play
    camp.act("look around")
    camp.memories.add("Mara seemed nervous around Captain Vale.")
    camp.act("wait")
    report = camp.context("Mara and Captain Vale talk")
    assert "- [inferred] Mara seemed nervous around Captain Vale." in report["story"]
    assert "interpretation, not established fact" in report["story"]


def test_pinned_always_and_near_duplicates_suppressed(play):
    wb, camp = play
    camp.act("look around")
    pinned = camp.memories.add("The bridge toll is three copper coins.", pinned=True)
    a = camp.memories.add("Mara keeps the silver key in her boot.")
    b = camp.memories.add("Mara keeps the silver key in her boot!")
    camp.act("wait")
    report = camp.context("Where does Mara keep the silver key?")
    ids = [m["id"] for m in report["memories"]["used"]]
    assert pinned in ids and a in ids and b not in ids
    assert report["memories"]["suppressed"] == [{"id": b, "duplicate_of": a}]


def test_use_counts_land_with_the_turn_and_never_lock_during_the_call(play, db_path):
    wb, camp = play
    camp.act("look around")
    memory_id = camp.memories.add("Mara keeps the silver key in her boot.")
    camp.act("wait")
    seen = []

    class LockProbe(ScriptedNarrator):
        def execute(self, prompt):
            raw = sqlite3.connect(db_path, timeout=0.1)
            try:
                raw.execute("BEGIN IMMEDIATE")
                raw.execute("ROLLBACK")
                seen.append("free")
            except sqlite3.OperationalError:
                seen.append("locked")
            raw.close()
            yield from super().execute(prompt)

    wb.configure(narrator=LockProbe())
    camp.act("ask Mara about the silver key in her boot")
    assert seen == ["free"]
    with wb.db.reading() as s:
        assert s.get(MemoryRow, memory_id).use_count == 1
    wb.configure(narrator=FailingNarrator())
    with pytest.raises(TurnFailed):
        camp.act("ask Mara about the silver key again")
    with wb.db.reading() as s:
        assert s.get(MemoryRow, memory_id).use_count == 1  # a failed turn counts nothing


def test_dry_runs_count_nothing(play):
    wb, camp = play
    camp.act("look around")
    memory_id = camp.memories.add("Mara keeps the silver key in her boot.")
    camp.act("wait")
    camp.context("the silver key")
    with wb.db.reading() as s:
        assert s.get(MemoryRow, memory_id).use_count == 0


def test_undo_makes_a_later_memory_ineligible_and_redo_brings_it_back(play):
    wb, camp = play
    camp.act("look around")
    camp.memories.add(SECRET)
    camp.act("wait")
    assert SECRET in used(camp.context("the ledger under the flagstone"))
    camp.undo()
    camp.undo()
    assert SECRET not in used(camp.context("the ledger under the flagstone"))
    camp.redo()
    camp.redo()
    assert SECRET in used(camp.context("the ledger under the flagstone"))
    with wb.db.reading() as s:
        assert s.scalar(select(MemoryRow.vector_model)) == "test-bag-of-words"  # the vector was kept
    camp.undo()
    camp.undo()
    camp.act("go the other way")
    assert SECRET not in used(camp.context("the ledger under the flagstone"))
    assert len(camp.memories) == 1  # kept, never deleted


def test_switching_embedding_model_re_embeds(play):
    wb, camp = play
    camp.act("look around")
    camp.memories.add(SECRET)
    camp.act("wait")

    class Other(BagOfWordsEmbedder):
        model_id = "other-model"

    other = Other()
    wb.configure(embedder=other)
    assert used(camp.context("the ledger")) == []  # no mixing of models
    camp.act("wait again")
    assert other.calls and SECRET in used(camp.context("the ledger under the flagstone"))


def test_recall_embeds_only_query_parts_no_earlier_query_held(play):
    """Recall's query parts go through the shared query-vector cache
    (engine.vectors.QUERIES): the story nodes a turn shares with the previous
    turn's query are not embedded again, the same query twice embeds nothing,
    and the cached vectors give the very memories and scores fresh ones do."""
    wb, camp = play
    camp.act("look around")
    camp.memories.add(SECRET)
    camp.memories.add("Mara keeps the silver key in her boot.")
    camp.act("wait")  # derived work embeds the bank
    camp.act("listen")  # its recall embeds its line and the story before it
    bag, line = wb.embedder, "I lift the third flagstone and look for the ledger"
    before = len(bag.calls)
    first = camp.context(line)["memories"]
    (new,) = bag.calls[before:]  # the line and the newest reply; the three older parts were held
    assert line in new[0] and new[1:] == [camp.history()[-1].text]
    again = camp.context(line)["memories"]
    assert len(bag.calls) == before + 1  # nothing new to embed
    assert again["used"] == first["used"] and SECRET in used({"memories": first})
    QUERIES.clear()
    fresh = camp.context(line)["memories"]
    assert len(bag.calls[-1]) == first["parts"] == 5 and fresh["used"] == first["used"]
