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


class JudgedNarrator(OpeningNarrator):
    """Like the embedded narrator: its reply's start is judged before it is shown."""

    judge_starts = True


OFF_TOPIC = " ".join(["The gulls wheel over the grey quay while the tide turns slowly."] * 4)  # 44 words


def judged(db_path, replies, **settings):
    wb = Workbench.open(db_path, background=False)
    narrator = JudgedNarrator(replies)
    settings = {"uptake_takes": 3, **settings}  # off by default (1): measured to gain nothing on the 135M model
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False, **settings)
    return narrator, wb.new_campaign("Rules", protagonist="Wren", opening="Rain on the harbour.")


def test_a_reply_that_ignores_what_the_input_named_is_stopped_and_asked_again(db_path):
    narrator, camp = judged(db_path, [OFF_TOPIC, "The lantern's flame steadies in your hand."])
    shown, said = [], []
    turn = camp.act("light the lantern", on_text=shown.append, on_status=said.append)
    assert len(narrator.prompts) == 2 and turn.text == "The lantern's flame steadies in your hand."
    assert "".join(shown) == turn.text  # the stopped take was never shown to the reader
    rules = turn.accounting["rules"]
    assert rules["asked"] == 2 and len(rules["set_aside"]) == 1 and "gulls" in rules["set_aside"][0]
    assert len(rules["set_aside"][0].split()) == 40  # stopped at the judged start, not read to its end
    assert any("asking again" in s for s in said)


def test_the_last_take_is_kept_whatever_it_says(db_path):
    narrator, camp = judged(db_path, [OFF_TOPIC], uptake_takes=3)
    turn = camp.act("light the lantern")
    assert len(narrator.prompts) == 3 and turn.text.startswith("The gulls")
    assert len(turn.accounting["rules"]["set_aside"]) == 2


def test_what_is_not_judged(db_path):
    narrator, camp = judged(db_path, [OFF_TOPIC])
    camp.continue_story()  # Continue names nothing
    camp.act("wait")  # nor does an input of no things
    assert len(narrator.prompts) == 2
    short = "The gulls cry."  # a reply shorter than the judged start is shown whole and kept
    narrator.replies = [short]
    shown = []
    assert camp.act("light the lantern", on_text=shown.append).text == short and "".join(shown) == short
    narrator, camp = judged(db_path.with_name("one.db"), [OFF_TOPIC], uptake_takes=1)
    camp.act("light the lantern")
    assert len(narrator.prompts) == 1


def test_a_server_narrator_streams_at_once_and_is_not_judged(db_path):
    wb, narrator, camp = play(db_path, [OFF_TOPIC])
    shown = []
    camp.act("light the lantern", on_text=shown.append)
    assert len(narrator.prompts) == 1 and len(shown) > 1  # word by word, not held back


def test_the_judged_start_is_off_by_default(db_path):
    wb = Workbench.open(db_path, background=False)
    narrator = JudgedNarrator([OFF_TOPIC])
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False)
    wb.new_campaign("Rules", protagonist="Wren", opening="Rain.").act("light the lantern")
    assert len(narrator.prompts) == 1


class SteeringNarrator(OpeningNarrator):
    """Like the embedded narrator: it can bias its sampling towards words."""

    steers = True


def test_the_steer_words_are_the_inputs_new_named_things(db_path):
    wb = Workbench.open(db_path, background=False)
    narrator = SteeringNarrator(["The flame catches."] * 4)
    wb.configure(narrator=narrator, embedder="none", memory_enabled=False, auto_summarize=False, steer_named=True)
    camp = wb.new_campaign("Rules", protagonist="Wren", opening="Rain on the harbour.")
    turn = camp.act("I light the lanterns")
    assert narrator.prompts[-1].steer == ("lanterns", "lantern")
    assert turn.accounting["rules"]["steered"] == ["lanterns", "lantern"]
    camp.act("walk along the harbour to the mill")  # the harbour is the story's already: the mill is new
    assert narrator.prompts[-1].steer == ("mill",)
    camp.continue_story()
    assert narrator.prompts[-1].steer == ()


def test_the_steer_is_off_by_setting_and_for_a_narrator_that_cannot_steer(db_path):
    wb, narrator, camp = play(db_path, ["The flame catches."] * 2, steer_named=True)
    camp.act("light the lantern")
    assert narrator.prompts[-1].steer == ()  # a server narrator is not steered
    wb2 = Workbench.open(db_path.with_name("off.db"), background=False)
    steering = SteeringNarrator(["The flame catches."])
    wb2.configure(narrator=steering, embedder="none", memory_enabled=False, auto_summarize=False, steer_named=False)
    wb2.new_campaign("Rules", protagonist="Wren", opening="Rain.").act("light the lantern")
    assert steering.prompts[-1].steer == ()
