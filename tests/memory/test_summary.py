"""The running summary follows the lineage and never carries an abandoned line."""
import pytest
from narrators import BagOfWordsEmbedder, TaskNarrator

from engine import Workbench

SENTINEL = "ABANDONED-CHAPEL-OATH-9930"


@pytest.fixture
def play(db_path):
    task = TaskNarrator(memory_reply=lambda excerpt: f"MEM[{SENTINEL if SENTINEL in excerpt else 'dry road'}]")
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=task, embedder=BagOfWordsEmbedder())
    camp = wb.new_campaign("Road", protagonist="Aldric", opening="The road forks.")
    yield wb, camp, task
    wb.close()


def test_summary_every_15_story_nodes_in_the_third_person(play):
    wb, camp, task = play
    for i in range(7):
        camp.act(f"walk {i}")
    assert camp.summary == ""
    camp.act("walk 7")  # 16 story nodes
    assert camp.summary and len(task.requests["summary"]) == 1
    request = task.requests["summary"][0]
    assert "Cast:\n- Aldric: the protagonist." in request and "Current story summary:\n(none yet)" in request
    report = camp.context("look")
    assert "Story summary:\n" in report["story"] and report["summary"]["trigger"] == "interval"


def test_a_new_line_never_inherits_an_abandoned_summary(play):
    wb, camp, task = play
    for i in range(20):
        camp.act(f"swear the {SENTINEL} in the chapel {i}")
    assert SENTINEL in camp.summary and SENTINEL in camp.context("look")["story"]
    while camp.can_undo:
        camp.undo()
    abandoned = camp.summaries()
    for i in range(20):
        camp.act(f"a dry road, nothing sworn {i}")
    assert SENTINEL not in camp.summary
    assert SENTINEL not in camp.context("look")["story"]
    seeds = task.requests["summary"][len(abandoned):]
    assert seeds and all(SENTINEL not in s for s in seeds)
    table = camp.summaries()
    assert not table[table["id"].isin(abandoned["id"])]["eligible"].any()
    assert len(table) > len(abandoned)  # nothing was deleted


def test_typed_summary_is_anchored_like_a_generated_one(play):
    wb, camp, task = play
    camp.act("walk")
    camp.act("walk on")
    camp.set_summary("The party swore an oath in the drowned chapel.")
    assert "drowned chapel" in camp.context("look")["story"]
    camp.undo()
    assert camp.summary == "" and "drowned chapel" not in camp.context("look")["story"]
    camp.redo()
    assert "drowned chapel" in camp.summary


def test_background_derived_work_runs_after_the_commit(db_path):
    wb = Workbench.open(db_path)  # background=True
    wb.configure(narrator=TaskNarrator(), embedder=BagOfWordsEmbedder())
    camp = wb.new_campaign("Road", opening="Start.")
    for i in range(7):
        camp.act(f"walk {i}")
        camp.wait_derived(10)
    assert len(camp.memories) == 2
    assert set(camp.derived()["status"]) <= {"ok", "idle"}
