"""The narrative state through real turns: extraction, snapshots, corrections, leaks."""
import pytest
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import NotAllowed, Workbench
from engine.narrative import count_leaks

BLOCK = ('Mara hands you the silver key.\n\n```state\n{"events": ['
         '{"type": "create_entity", "entity": "ila", "entity_type": "character", "name": "Ila"}, '
         '{"type": "create_entity", "entity": "mara", "entity_type": "character", "name": "Mara"}, '
         '{"type": "create_entity", "entity": "silver-key", "entity_type": "item", "name": "Silver key"}, '
         '{"type": "set_possession", "item": "silver-key", "owner": "ila"}]}\n```')


@pytest.fixture
def wb(db_path):
    bench = Workbench.open(db_path, background=False)
    bench.configure(embedder=BagOfWordsEmbedder(), memory_enabled=False, auto_summarize=False)
    yield bench
    bench.close()


def play(wb, replies):
    wb.configure(narrator=ScriptedNarrator(replies))
    return wb.new_campaign("Keys", protagonist="Ila", opening="A locked door.")


def test_the_state_block_leaves_the_prose_and_becomes_state(wb):
    camp = play(wb, [BLOCK])
    turn = camp.act("ask Mara for the key")
    assert turn.text == "Mara hands you the silver key."
    assert "mara" in camp.state["entities"] and "silver-key" in camp.state["entities"]
    events = camp.events()
    assert set(events["type"]) >= {"create_entity"} and events["source"].eq("narrator").all()
    assert turn.report["narrative"]["removals"][0]["rule"]
    assert count_leaks(camp)["leaking"] == 0
    prompt = camp.context("look")
    assert "```state" in prompt["system"] and "Mara" in prompt["story"]


def test_partial_application_records_the_refusals(wb):
    reply = ('The door creaks.\n\n```state\n{"events": [{"type": "create_entity", "entity": "door", '
             '"entity_type": "thing", "name": "Door"}, {"type": "set_possession", "item": "ghost-item", '
             '"owner": "nobody"}]}\n```')
    camp = play(wb, [reply])
    camp.act("push the door")
    events = camp.events()
    assert list(events["accepted"]) == [True, False]
    assert events.iloc[1]["reason"]
    assert "door" in camp.state["entities"]


def test_snapshots_follow_every_head_move(wb):
    camp = play(wb, [BLOCK, "Nothing else happens."])
    camp.act("ask Mara for the key")
    with_key = camp.state
    camp.retry()  # a take that established nothing: the state before the turn
    assert camp.state == {} or "silver-key" not in camp.state.get("entities", {})
    camp.select_take(1)
    assert camp.state == with_key
    camp.undo()
    assert "silver-key" not in camp.state.get("entities", {})
    camp.redo()
    assert camp.state == with_key


def test_a_correction_outranks_the_story_and_says_what_it_refused(wb):
    camp = play(wb, [BLOCK, "The corridor is quiet."])
    camp.act("ask Mara for the key")
    result = camp.correct([
        {"type": "set_possession", "item": "silver-key", "owner": "mara"},
        {"type": "set_possession", "item": "no-such-thing", "owner": "mara"},
    ], note="Mara never gave it up.")
    assert camp.state["possessions"]["silver-key"] == "mara"
    assert len(result.applied) == 1 and len(result.refused) == 1 and "Refused" in result.message
    audit = camp.events()
    assert (audit["source"] == "correction").sum() == 2 and "Mara never gave it up." in set(audit["note"])
    camp.act("walk on")  # the next turn starts from the corrected state
    assert camp.state["possessions"]["silver-key"] == "mara"
    camp.undo()
    assert camp.state["possessions"]["silver-key"] == "mara"  # kept in the corrected node's snapshot
    with pytest.raises(NotAllowed, match="Nothing was corrected"):
        camp.correct({"type": "withdraw_fact", "fact_id": "f-404", "reason": "never true"})


def test_an_edit_with_a_state_block_carries_the_state_it_implies(wb):
    camp = play(wb, ["The hall is empty."])
    first = camp.act("enter")
    camp.edit(first.id, BLOCK)
    assert camp.history()[-1].text == "Mara hands you the silver key."
    assert "silver-key" in camp.state["entities"]


def test_leaks_in_stored_replies_are_counted(wb):
    camp = play(wb, ["A clean reply."])
    camp.act("wait")
    with wb.db.writing() as s:
        from engine.store import NodeRow

        node = s.get(NodeRow, camp.history()[-1].id)
        node.text = 'A reply.\n\n```state\n{"events": []}\n```'
    result = count_leaks(camp)
    assert result["ai"] == 1 and result["leaking"] == 1 and result["ids"] == [camp.history()[-1].id]


@pytest.mark.realmodel
def test_the_embedded_narrator_leaves_no_protocol_in_what_is_stored(tmp_path):
    wb = Workbench.open(tmp_path / "leaks.db", background=False)
    wb.configure(narrator="local", embedder=BagOfWordsEmbedder(), max_output_tokens=96)
    camp = wb.new_campaign("Harbour", protagonist="Ines", opening="The harbour bell rings twice.")
    for text in ["walk to the docks", "ask the fisherman about the bell", "I look at the boats",
                 "follow the gulls", '"Who rang the bell?"', "climb the tower", "I listen",
                 "open the trapdoor", "go down the ladder", "light a lamp"]:
        camp.act(text)
    assert len(camp.stored_replies()) == 10
    assert count_leaks(camp)["leaking"] == 0
