"""Memories: cadence, third person with the cast, lineage, eviction, status."""
import pytest
from helpers import texts
from narrators import BagOfWordsEmbedder, TaskNarrator
from sqlalchemy import select

from engine import Workbench
from engine.memory import classify_authority
from engine.store.memory_tables import MemoryRow


@pytest.fixture
def task():
    return TaskNarrator()


@pytest.fixture
def play(db_path, task):
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=task, embedder=BagOfWordsEmbedder())
    camp = wb.new_campaign("Road", protagonist="Aldric", opening="The road forks at the Crooked Lantern.")
    yield wb, camp
    wb.close()


def memory_rows(wb):
    with wb.db.reading() as s:
        return s.scalars(select(MemoryRow).order_by(MemoryRow.id)).all()


def test_authority_is_the_applications_call():
    assert classify_authority("Aldric promised Mara he would return before dawn.") == "accepted_story"
    assert classify_authority("Mara seemed uneasy when Captain Vale was mentioned.") == "heuristic"


def test_cadence_first_at_12_story_nodes_then_one_block_behind_the_tip(play):
    wb, camp = play
    counts = []
    for i in range(10):
        camp.act(f"walk on, step {i}")
        counts.append(len(memory_rows(wb)))
    # A turn writes two story nodes; blocks of 6 close once a 7th node exists past them.
    assert counts == [0, 0, 0, 0, 0, 1, 2, 2, 2, 3]
    rows = memory_rows(wb)
    # Each block's memories are anchored at the node it ends on, each naming the line it came from.
    assert sorted({m.depth for m in rows}) == [6, 12, 18]
    assert all(m.depth - 5 <= m.source_start <= m.source_end <= m.depth for m in rows)


def test_the_memory_prompt_names_the_protagonist_and_asks_for_third_person(play, task):
    wb, camp = play
    for i in range(6):
        camp.act(f"walk on, step {i}")
    request = task.requests["memory"][0]
    assert request.startswith("Cast:\n- Aldric: the protagonist.")
    assert "> You walk on, step 0." in request and request.endswith("Facts:")
    from engine.memory.facts import FACTS_SYSTEM

    assert "never 'I', 'you'" in FACTS_SYSTEM


def test_forks_inherit_exactly_their_ancestors_memories(play):
    wb, camp = play
    for i in range(7):
        camp.act(f"walk on, step {i}")
    assert len(memory_rows(wb)) == 2
    for _ in range(4):
        camp.undo()            # back to depth 6: only the first block is on the path
    frame = camp.memories.frame()
    assert list(frame["on_path"]) == [True, False]
    for i in range(4):
        camp.act(f"turn back, step {i}")
    frame = camp.memories.frame()
    assert len(frame) == 3 and list(frame["on_path"]) == [True, False, True]
    assert frame.iloc[2]["source_start"] == 7  # the anchor rewound with the lineage


def test_a_failing_summary_model_is_recorded_and_the_story_is_untouched(db_path):
    task = TaskNarrator(fail_tasks=("memory",))
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=task, embedder=BagOfWordsEmbedder())
    camp = wb.new_campaign("Road", opening="Start.")
    for i in range(7):
        camp.act(f"walk {i}")
    story, head = texts(camp), camp.head
    status = camp.derived().set_index("kind")
    assert status.loc["memory", "status"] == "failed" and status.loc["memory", "failures"] == 7 - 5
    assert "unreachable" in status.loc["memory", "detail"]
    assert texts(camp) == story and camp.head == head
    task.fail_tasks = ()
    camp.act("walk on")  # the next turn plays, and the missed blocks are caught up
    status = camp.derived().set_index("kind")
    assert status.loc["memory", "status"] == "ok" and status.loc["memory", "failures"] == 0
    assert len(memory_rows(wb)) == 2


def test_eviction_is_least_recently_used_and_spares_pins(play):
    wb, camp = play
    wb.configure(memory_capacity=2)
    camp.act("begin")
    ids = [camp.memories.add(f"Fact number {i} about the tower.") for i in range(3)]
    camp.memories.pin(ids[0])
    camp.act("continue")  # derived work evicts down to capacity
    frame = camp.memories.frame().set_index("id")
    assert frame.loc[ids[0], "forgotten"] == False  # noqa: E712 - pinned
    assert frame["forgotten"].sum() == 1 and frame.loc[ids[1], "forgotten"]


def test_a_new_memory_is_not_evicted_by_the_run_that_wrote_it(play):
    """The frozen-bank regression: ordering by use count first evicted every new memory."""
    wb, camp = play
    wb.configure(memory_capacity=1)
    for i in range(6):
        camp.act(f"walk on, step {i}")
    old = camp.memories.frame()
    with wb.db.writing() as s:
        s.get(MemoryRow, int(old.iloc[0]["id"])).use_count = 9
    for i in range(3):
        camp.act(f"keep going {i}")
    frame = camp.memories.frame()
    newest = frame.iloc[-1]
    assert not newest["forgotten"] and frame.iloc[0]["forgotten"]


def test_edit_pin_delete_and_errors(play):
    wb, camp = play
    camp.act("begin")
    memory_id = camp.memories.add("Mara hid the key.")
    camp.memories.edit(memory_id, "Mara probably hid the key.")
    row = camp.memories.frame().iloc[0]
    assert row["authority"] == "heuristic" and not row["embedded"]
    camp.memories.delete(memory_id)
    assert len(camp.memories) == 0
    from engine import NotFound

    with pytest.raises(NotFound, match="no memory"):
        camp.memories.pin(memory_id)


def test_word_limits_are_enforced_not_only_asked_for(db_path):
    from engine.memory.prompts import clip_words

    assert clip_words("One two three. Four five six seven.", 5) == "One two three."
    assert clip_words("a b c d e f g", 4) == "a b c d…"
    long = TaskNarrator(memory_reply=lambda excerpt: "word " * 300)
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=long, embedder=BagOfWordsEmbedder())
    camp = wb.new_campaign("Road", opening="Start.")
    for i in range(6):
        camp.act(f"walk {i}")
    assert len(camp.memories.frame().iloc[0]["text"].split()) <= 50


def test_memories_that_do_not_fit_are_dropped_not_fatal(db_path):
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=TaskNarrator(), embedder=BagOfWordsEmbedder(), context_budget=1400, max_output_tokens=64,
                 memory_top_k=10)
    camp = wb.new_campaign("Road", opening="Start.")
    camp.act("walk")
    for i in range(10):
        camp.memories.add(f"Memory {i}: the lantern road " + "runs past the mill and the weir " * 8, pinned=True)
    camp.act("wait")  # derived work embeds them
    report = camp.context("the lantern road past the mill")
    assert report["memories"]["dropped_for_budget"] and report["tokens"]["total"] <= report["tokens"]["budget"]


def test_an_edit_below_the_tip_withdraws_what_the_old_line_produced(play):
    """Nodes are never deleted: replacing one (an edit, a retry) starts a line of its
    own, and the memories of the old line's later blocks stop applying on it; the
    anchor rewinds with them and the new line's blocks are written afresh."""
    wb, camp = play
    for i in range(10):
        camp.act(f"walk on, step {i}")
    assert sorted({m.depth for m in memory_rows(wb)}) == [6, 12, 18]
    at_depth_10 = next(e for e in camp.history() if e.depth == 10)
    camp.edit(at_depth_10.id, "The road floods.")
    frame = camp.memories.frame()
    assert [frame[frame["depth"] == d]["on_path"].all() for d in (6, 12, 18)] == [True, False, False]
    assert not frame[frame["depth"] > 6]["on_path"].any()  # 7-12 and 13-18 covered the old line
    for i in range(4):
        camp.act(f"wade on, step {i}")
    frame = camp.memories.frame()
    on_path = frame[frame["on_path"]]
    # 7-12 is written again from the new line's text; 13-18 waits for one more node of slack.
    assert sorted(set(on_path["depth"])) == [6, 12]
    assert sorted(frame["depth"]).count(12) >= 2  # the old line's memories are kept, for display and for its own future
