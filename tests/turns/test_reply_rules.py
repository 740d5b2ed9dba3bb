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


class OpeningNarrator(ScriptedNarrator):
    """A narrator that, like the embedded one, writes on from a given opening."""

    continues_opening = True


def test_the_reply_is_begun_from_the_input_and_the_opening_is_not_stored(db_path):
    wb = Workbench.open(db_path, background=False)
    narrator = OpeningNarrator(["The flame catches and the cellar walls glow."])
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("Rules", protagonist="Wren", opening="Rain on the harbour.")
    turn = camp.act("I light the lantern")
    assert narrator.prompts[-1].opening == "You light the lantern."
    assert turn.text == "The flame catches and the cellar walls glow."  # the narrator's words only
    assert turn.accounting["rules"]["opening"] == "You light the lantern."
    assert turn.report["opening"]["tokens"] > 0  # priced in the budget
    camp.direct("A storm breaks over the harbour.")
    assert narrator.prompts[-1].opening == "A storm breaks over the harbour."
    camp.direct("Make the storm worse.")  # an order to the narrator is not story to begin with
    assert narrator.prompts[-1].opening == ""
    camp.continue_story()
    assert narrator.prompts[-1].opening == ""
    camp.act('"Who goes there?"')
    camp.retry()  # a retry answers the same input, begun the same way
    assert narrator.prompts[-1].opening == narrator.prompts[-2].opening == 'You say "Who goes there?"'


def test_a_narrator_that_cannot_continue_an_opening_is_not_given_one(db_path):
    wb, narrator, camp = play(db_path, ["The flame catches."])
    turn = camp.act("light the lantern")
    assert narrator.prompts[-1].opening == "" and turn.accounting["rules"]["opening"] == ""
    assert "[Now: You light the lantern.]" in narrator.prompts[-1].story  # the input is still said last


def test_the_opening_can_be_turned_off(db_path):
    wb = Workbench.open(db_path, background=False)
    narrator = OpeningNarrator(["The flame catches."])
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False, open_reply=False)
    camp = wb.new_campaign("Rules", protagonist="Wren", opening="Rain on the harbour.")
    camp.act("light the lantern")
    assert narrator.prompts[-1].opening == ""
