import random

import pytest
from helpers import all_node_ids, census, head_state_matches, set_states, texts
from sqlalchemy import func, select

from engine import NotAllowed
from engine.store import BranchRow, NodeRow

OPENING = "You stand at the mouth of a sea cave."


def test_new_campaign_starts_at_its_opening(camp):
    assert texts(camp) == [OPENING]
    entry = camp.history()[0]
    assert entry.kind == "start" and entry.depth == 0
    assert not camp.can_undo and not camp.can_redo and not camp.can_retry
    with pytest.raises(NotAllowed, match="opening"):
        camp.undo()


def test_campaign_without_opening_is_empty(wb):
    camp = wb.new_campaign("Blank")
    assert camp.history() == [] and camp.head[1] == -1
    with pytest.raises(NotAllowed, match="not started"):
        camp.undo()
    camp.act("look around")
    assert texts(camp) == ["> You look around.", "Narration 1."]
    camp.undo()
    assert camp.history() == [] and camp.can_redo


def test_turns_append_input_and_narration(camp):
    camp.act("go north")
    camp.act("go south")
    assert texts(camp) == [OPENING, "> You go north.", "Narration 1.", "> You go south.", "Narration 2."]
    assert [e.depth for e in camp.history()] == [0, 1, 2, 3, 4]


def test_undo_redo_round_trip_deletes_nothing(camp, wb):
    for word in ("north", "south", "east"):
        camp.act(f"go {word}")
    full = texts(camp)
    ids = all_node_ids(wb)
    camp.undo()
    assert texts(camp) == full[:5]
    camp.undo()
    camp.undo()
    assert texts(camp) == [OPENING] and not camp.can_undo
    assert all_node_ids(wb) == ids
    for _ in range(3):
        camp.redo()
    assert texts(camp) == full and not camp.can_redo
    with pytest.raises(NotAllowed, match="Nothing to redo"):
        camp.redo()
    assert all_node_ids(wb) == ids


def test_retry_adds_takes_and_excludes_the_retried_take(camp, narrator):
    camp.act("go north")
    second = camp.retry()
    third = camp.retry()
    assert (third.take, third.takes) == (3, 3)
    assert [t.text for t in camp.takes()] == ["Narration 1.", "Narration 2.", "Narration 3."]
    assert "Narration 1." not in narrator.prompts[1].story
    assert "Narration 2." not in narrator.prompts[2].story
    assert narrator.prompts[2].story.count("> You go north.") == 1
    assert second.input == "> You go north."
    assert texts(camp)[-1] == "Narration 3."


def test_exactly_one_live_take_per_turn(camp, wb):
    camp.act("go north")
    camp.retry()
    camp.retry()
    camp.select_take(2)
    with wb.db.reading() as s:
        rows = s.execute(select(NodeRow.text, NodeRow.live).where(NodeRow.kind == "narrator")).all()
    assert sorted(rows) == [("Narration 1.", False), ("Narration 2.", True), ("Narration 3.", False)]


def test_each_take_keeps_its_own_future(camp):
    camp.act("go north")          # Narration 1
    camp.act("dig")               # Narration 2 under take 1
    camp.undo()
    camp.retry()                  # Narration 3: take 2 of turn 1
    camp.act("swim")              # Narration 4 under take 2
    camp.undo()
    assert [t.text for t in camp.takes()] == ["Narration 1.", "Narration 3."]
    camp.select_take(1)
    assert texts(camp)[-1] == "Narration 1."
    camp.redo()
    assert texts(camp)[-2:] == ["> You dig.", "Narration 2."]
    camp.undo()
    camp.select_take(2)
    camp.redo()
    assert texts(camp)[-2:] == ["> You swim.", "Narration 4."]


def test_select_take_out_of_range_says_which_exist(camp):
    camp.act("go north")
    with pytest.raises(NotAllowed, match="takes 1 to 1"):
        camp.select_take(3)


def test_writing_behind_the_tip_forks_and_keeps_the_old_future(camp, wb):
    camp.act("go north")
    camp.act("go south")
    before = census(wb)
    camp.undo()
    camp.act("go west")
    after = census(wb)
    assert texts(camp)[-2:] == ["> You go west.", "Narration 3."]
    # One branch row and the turn's own rows: the fork copies nothing.
    assert after["branches"] - before["branches"] == 1
    assert after["nodes"] - before["nodes"] == 2
    with wb.db.reading() as s:
        assert s.scalar(select(func.count()).where(NodeRow.text == "Narration 2.")) == 1


def test_continue_from_the_live_tip_creates_no_branch(camp, wb):
    camp.act("go north")
    before = census(wb)["branches"]
    camp.continue_story()
    camp.act("wait")
    assert census(wb)["branches"] == before


def test_edit_keeps_the_original_and_its_future(camp, wb):
    first = camp.act("go north")
    camp.act("go south")
    edited = camp.edit(first.id, "The tunnel narrows to a crawl.")
    assert texts(camp)[-1] == "The tunnel narrows to a crawl."
    assert (edited.take, edited.takes) == (2, 2)
    assert not camp.can_redo  # the edit's own future is empty
    camp.select_take(1)
    camp.redo()
    assert texts(camp)[-3:] == ["Narration 1.", "> You go south.", "Narration 2."]
    with pytest.raises(NotAllowed, match="Only narration"):
        camp.edit(camp.history()[1].id, "x")


def test_save_point_restore_and_delete(camp, wb):
    camp.act("go north")
    sp = camp.save_point("before the crypt", note="torch lit")
    camp.act("enter the crypt")
    camp.act("open the coffin")
    ids = all_node_ids(wb)
    camp.restore(sp)
    assert texts(camp)[-1] == "Narration 1."
    assert camp.can_redo and all_node_ids(wb) == ids
    assert [(p.name, p.note) for p in camp.save_points()] == [("before the crypt", "torch lit")]
    camp.delete_save_point(sp)
    assert camp.save_points() == []


def test_save_point_needs_a_story_and_a_name(wb, camp):
    with pytest.raises(NotAllowed, match="name"):
        camp.save_point("  ")
    blank = wb.new_campaign("Blank")
    with pytest.raises(NotAllowed, match="Nothing to save"):
        blank.save_point("start")


def test_every_head_move_restores_the_snapshot_of_its_node(camp, wb):
    camp.act("go north")
    camp.act("go south")
    camp.retry()
    sp = camp.save_point("two takes")
    set_states(wb)
    moves = [
        camp.undo, camp.redo, lambda: camp.select_take(1), lambda: camp.select_take(2),
        lambda: camp.restore(sp), camp.undo, camp.undo,
    ]
    seen = set()
    for move in moves:
        move()
        assert head_state_matches(camp), move
        seen.add(camp.state.get("scene", {}).get("summary"))
    assert len(seen) >= 3  # the moves landed on different nodes, so the check had something to tell apart


def test_random_walk_keeps_the_tree_invariants(wb, narrator):
    """Hundreds of mixed operations: nothing is ever deleted, coordinates stay
    unique, the path is contiguous, each turn has exactly one live take."""
    camp = wb.new_campaign("Walk", opening="It begins.")
    rng = random.Random(7)
    seen: set[int] = set()
    for _ in range(150):
        op = rng.choice(["act", "act", "continue", "direct", "retry", "undo", "redo", "take", "edit", "save"])
        try:
            if op == "act":
                camp.act(rng.choice(["go on", "I wait", "\"Hello\""]))
            elif op == "continue":
                camp.continue_story()
            elif op == "direct":
                camp.direct("Bring rain.")
            elif op == "retry":
                camp.retry()
            elif op == "undo":
                camp.undo()
            elif op == "redo":
                camp.redo()
            elif op == "take":
                takes = camp.takes()
                if takes:
                    camp.select_take(rng.randint(1, len(takes)))
            elif op == "edit":
                narr = [e for e in camp.history() if e.kind == "narrator"]
                if narr:
                    camp.edit(rng.choice(narr).id, "An edited passage.")
            elif op == "save":
                camp.restore(camp.save_point("s")) if camp.history() else None
        except NotAllowed:
            pass
        ids = all_node_ids(wb)
        assert seen <= ids
        seen = ids
        history = camp.history()
        assert [e.depth for e in history] == list(range(len(history)))
        assert history[-1].kind in ("start", "narrator")
        with wb.db.reading() as s:
            coords = s.execute(select(NodeRow.branch_id, NodeRow.depth)).all()
            assert len(coords) == len(set(coords))
            groups = s.execute(
                select(NodeRow.parent_id, NodeRow.depth, func.sum(NodeRow.live)).group_by(NodeRow.parent_id, NodeRow.depth)
            ).all()
            assert all(live == 1 for _, _, live in groups), groups
            assert s.scalar(select(func.count()).select_from(BranchRow)) >= 1
