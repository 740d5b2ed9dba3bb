import sqlite3
import threading

import pytest
from helpers import census, texts
from narrators import BlockingNarrator, FailingNarrator, ScriptedNarrator

from engine import NarratorError, NotAllowed, TurnCancelled, TurnFailed, TurnInProgress


def test_streaming_delivers_every_chunk_in_order(wb, camp):
    wb.configure(narrator=ScriptedNarrator(["The tide comes in fast."], reasoning="Think of tides."))
    seen, thoughts = [], []
    turn = camp.act("wait", on_text=seen.append, on_reasoning=thoughts.append)
    assert len(seen) == 5 and "".join(seen) == "The tide comes in fast." == turn.text
    assert turn.reasoning == "Think of tides." and thoughts == ["Think of tides."]


def test_the_prompt_carries_rules_premise_protagonist_and_the_input_once(wb, camp, narrator):
    camp.act("I show Mara the sealed letter")
    prompt = narrator.prompts[-1]
    assert "A cave by the sea." in prompt.system and "Ila" in prompt.system
    assert prompt.story.count("> I show Mara the sealed letter.") == 1
    assert "You I" not in prompt.story
    assert prompt.story.startswith("You stand at the mouth of a sea cave.")


def test_direction_reaches_the_narrator_marked_out_of_character(camp, narrator):
    camp.direct("Make the storm break.")
    assert "[Story direction from the player: Make the storm break.]" in narrator.prompts[-1].story
    assert camp.history()[-2].kind == "direction"


def test_a_turn_records_its_prompt_usage_and_timings(camp):
    turn = camp.act("go north")
    story = turn.report["prompt"]["story"]
    assert "You stand at the mouth of a sea cave.\n\n> You go north.\n\n[Hard limit:" in story
    assert turn.report["prompt"]["system"] and turn.report["tokens"]["estimate"] > 0
    assert (turn.usage["prompt_tokens"], turn.usage["completion_tokens"]) == (10, 2)
    assert set(turn.timings) == {"prepare_ms", "generate_ms"}
    assert turn.narrator == "scripted"  # CountingNarrator keeps ScriptedNarrator's model id


@pytest.mark.parametrize("error", [ConnectionError("reset"), NarratorError("HTTP 500 from the endpoint."), ValueError("bad")])
def test_a_narrator_failing_mid_stream_writes_nothing(wb, camp, error):
    camp.act("go north")
    before, story = census(wb), texts(camp)
    wb.configure(narrator=FailingNarrator(error))
    streamed = []
    with pytest.raises(TurnFailed, match="Nothing was written"):
        camp.act("go south", on_text=streamed.append)
    assert streamed  # it had started
    assert census(wb) == before and texts(camp) == story
    with pytest.raises(TurnFailed):
        camp.retry()
    assert census(wb) == before


def test_an_empty_reply_writes_nothing(wb, camp):
    before = census(wb)
    wb.configure(narrator=ScriptedNarrator(["   "]))
    with pytest.raises(TurnFailed, match="no story text"):
        camp.act("wait")
    assert census(wb) == before


def test_stop_cancels_and_writes_nothing(wb, camp):
    slow = BlockingNarrator()
    wb.configure(narrator=slow)
    before = census(wb)
    errors = []

    def play():
        try:
            camp.act("wait")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    worker = threading.Thread(target=play)
    worker.start()
    assert slow.started.wait(5)
    camp.stop()
    slow.release.set()
    worker.join(5)
    assert len(errors) == 1 and isinstance(errors[0], TurnCancelled)
    assert census(wb) == before
    assert not camp.busy


def test_one_turn_at_a_time(wb, camp):
    slow = BlockingNarrator()
    wb.configure(narrator=slow)
    worker = threading.Thread(target=camp.act, args=("wait",))
    worker.start()
    assert slow.started.wait(5)
    try:
        assert camp.busy
        with pytest.raises(TurnInProgress, match="still being narrated"):
            camp.act("run")
        with pytest.raises(TurnInProgress):
            camp.undo()
        with pytest.raises(TurnInProgress):
            camp.save_point("mid-turn")
    finally:
        slow.release.set()
        worker.join(5)
    # a reply with no complete sentence is kept whole and marked cut (issue 30's reply rules)
    assert texts(camp)[-1] == "first second third…"
    camp.undo()  # free again


def test_a_story_moved_by_another_process_refuses_the_commit(wb, camp, db_path):
    camp.act("go north")
    camp.act("go south")
    before = census(wb)

    class Mover(ScriptedNarrator):
        def execute(self, prompt):
            raw = sqlite3.connect(db_path)
            raw.execute("UPDATE campaigns SET head_depth = 2")
            raw.commit()
            raw.close()
            yield from super().execute(prompt)

    wb.configure(narrator=Mover())
    with pytest.raises(TurnFailed, match="story moved"):
        camp.act("go east")
    assert census(wb) == before


def test_a_prompt_that_cannot_fit_is_refused_with_the_breakdown(wb, camp):
    wb.configure(context_budget=600, max_output_tokens=400)
    before = census(wb)
    with pytest.raises(TurnFailed) as err:
        camp.act("wait")
    message = str(err.value)
    assert "400 reserved for the reply" in message and "256-token safety reserve" in message
    assert "Raise the context budget" in message
    assert census(wb) == before


def test_a_small_server_window_is_what_binds(wb, camp):
    wb.configure(narrator=ScriptedNarrator(window=512), context_budget=16384, max_output_tokens=200)
    with pytest.raises(TurnFailed, match="load the model with a larger window"):
        camp.act("wait")


def test_history_is_trimmed_to_the_budget_keeping_the_newest(wb, camp, narrator):
    wb.configure(context_budget=1200, max_output_tokens=100)
    for i in range(60):
        camp.act(f"take step number {i} along the long dark winding tunnel under the hill")
    prompt = narrator.prompts[-1]
    turn = camp.turn(camp.history()[-1].id)
    # The oldest steps left the history; one may come back only as a recalled line, marked as such.
    shown = "\n\n".join(part for part in prompt.story.split("\n\n")
                         if not part.startswith(("Memories from earlier", "Also from earlier")))
    assert "step number 59" in shown and "step number 0 " not in shown
    assert turn.report["history"]["included"] < turn.report["history"]["total"]
    assert turn.report["tokens"]["total"] + 100 <= 1200


def test_unknown_mode_and_empty_input_are_refused(camp):
    with pytest.raises(NotAllowed):
        camp.act("   ")
    with pytest.raises(NotAllowed):
        camp.direct("")


def test_reasoning_has_its_own_budget(wb, camp):
    wb.configure(narrator=ScriptedNarrator(["Short reply."], reasoning="think " * 400), max_reasoning_tokens=50)
    turn = camp.act("wait")
    assert turn.text == "Short reply."
    assert turn.reasoning.endswith("[… reasoning cut at its 50-token budget]")
    assert "think" not in camp.context()["story"]
