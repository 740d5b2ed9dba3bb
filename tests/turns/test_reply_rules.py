"""The runner holds the narration's rules: a protocol-only reply is asked for
again once, a reply is stored cut to its last sentence (the cut part kept on
the Turn), and first-person narration is repaired."""
import pytest
from narrators import ScriptedNarrator

from engine import TurnFailed, Workbench

PROTOCOL_ONLY = '```state\n{"events": []}\n```'


def play(db_path, replies, **settings):
    wb = Workbench.open(db_path, background=False)
    narrator = ScriptedNarrator(replies)
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False, **settings)
    return wb, narrator, wb.new_campaign("Rules", protagonist="Wren", opening="Rain on the harbour.")


def test_a_protocol_only_reply_is_asked_for_again_once(db_path):
    wb, narrator, camp = play(db_path, [PROTOCOL_ONLY, "The lamp flickers."])
    seen = []
    turn = camp.act("light the lamp", on_status=seen.append)
    assert turn.text == "The lamp flickers." and len(narrator.prompts) == 2
    assert narrator.prompts[0].story == narrator.prompts[1].story  # the same request, asked again
    assert any("asking it once more" in s for s in seen)
    assert turn.accounting["rules"]["asked"] == 2


def test_two_protocol_only_replies_fail_the_turn_and_write_nothing(db_path):
    wb, narrator, camp = play(db_path, [PROTOCOL_ONLY])
    with pytest.raises(TurnFailed, match="no story text"):
        camp.act("light the lamp")
    assert len(narrator.prompts) == 2 and len(camp.history()) == 1


def test_a_reply_ending_mid_sentence_is_stored_cut_with_its_tail(db_path):
    wb, narrator, camp = play(db_path, ["The lamp flickers. A shadow moves behind the", "It is only the cat."])
    turn = camp.act("light the lamp")
    assert turn.text == "The lamp flickers." and turn.cut and turn.tail == "A shadow moves behind the"
    again = camp.turn(turn.id)  # read back from the file
    assert again.cut and again.tail == "A shadow moves behind the"
    assert camp.history()[-1].text == "The lamp flickers."
    nxt = camp.continue_story()
    assert "A shadow moves behind the" not in narrator.prompts[-1].story.split("The lamp flickers.")[-1]
    assert nxt.text == "It is only the cat." and not nxt.cut and nxt.tail == ""


def test_a_complete_reply_is_not_cut(db_path):
    wb, narrator, camp = play(db_path, ["The lamp flickers."])
    turn = camp.act("light the lamp")
    assert not turn.cut and turn.tail == ""


def test_first_person_narration_is_repaired_to_you(db_path):
    wb, narrator, camp = play(db_path, ['I walk to the door and my hand shakes. "I am here," I say.'])
    turn = camp.act("go to the door")
    assert turn.text == 'You walk to the door and your hand shakes. "I am here," you say.'
    assert turn.accounting["rules"]["first_person_repaired"]


def test_a_reply_without_one_complete_sentence_is_marked_as_trailing_off(db_path):
    wb, narrator, camp = play(db_path, ["The lamp flickers and the shadows,"])
    turn = camp.act("light the lamp")
    assert turn.text == "The lamp flickers and the shadows…" and turn.cut and turn.tail == ""
    assert turn.accounting["rules"]["trailed_off"]
