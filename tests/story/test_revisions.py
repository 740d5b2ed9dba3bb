"""A passage edited where it stands, and a narration continued in place.

Editing an older passage makes a new revision of it: the story after it is
kept, the old text is kept and can be brought back, and a later turn's record
still rebuilds the history as the narrator was shown it. Continue writes on in
the newest narration itself: one passage, one take.
"""
from __future__ import annotations

import pytest
from narrators import ScriptedNarrator

from engine import NotAllowed, Workbench


class OpeningNarrator(ScriptedNarrator):
    """Writes on from a prompt's opening, as the embedded narrator does."""

    continues_opening = True


def _played(tmp_path, narrator, turns: int):
    wb = Workbench.open(tmp_path / "rev.db", background=False)
    wb.configure(narrator=narrator, memory_enabled=False, auto_summarize=False, embedder="none")
    camp = wb.new_campaign("Rev", premise="An old lighthouse.", protagonist="Wren", opening="Rain on the cliff.")
    for i in range(1, turns + 1):
        camp.act(f"I climb to landing {i}")
    return camp


def test_editing_turn_five_of_nine_keeps_the_story_after_it(tmp_path):
    replies = [f"Landing {i} is quiet." for i in range(1, 10)]
    camp = _played(tmp_path, ScriptedNarrator(replies), 9)
    before = camp.history()
    fifth = [e for e in before if e.kind == "narrator"][4]
    assert fifth.text == "Landing 5 is quiet."

    entry = camp.revise(fifth.id, "Landing 5 smells of lamp oil.")

    after = camp.history()
    assert entry.id == fifth.id and entry.edited and entry.takes == 1
    assert [e.id for e in after] == [e.id for e in before]  # nothing after it went
    assert after[-1].text == "Landing 9 is quiet."
    assert [e.text for e in after if e.id == fifth.id] == ["Landing 5 smells of lamp oil."]
    assert not camp.can_redo
    texts = camp.revisions(fifth.id)
    assert [(r.n, r.text, r.current) for r in texts] == [(1, "Landing 5 is quiet.", False),
                                                         (2, "Landing 5 smells of lamp oil.", True)]
    assert texts[0].reason == "edit"

    camp.restore_revision(fifth.id, 1)
    assert [e.text for e in camp.history() if e.id == fifth.id] == ["Landing 5 is quiet."]
    assert len(camp.revisions(fifth.id)) == 3  # the text it replaced is kept too
    assert [e.id for e in camp.history()] == [e.id for e in before]


def test_a_players_line_is_revised_as_the_story_records_lines(tmp_path):
    camp = _played(tmp_path, ScriptedNarrator(["The stair turns."]), 3)
    line = [e for e in camp.history() if e.kind == "player"][0]
    camp.revise(line.id, "I knock at the door")
    history = camp.history()
    assert history[1].text == "> I knock at the door." and len(history) == 7


def test_refusals_say_why(tmp_path):
    camp = _played(tmp_path, ScriptedNarrator(["The stair turns."]), 2)
    narration = camp.history()[-1]
    with pytest.raises(NotAllowed, match="already says exactly that"):
        camp.revise(narration.id, "The stair turns.")
    with pytest.raises(NotAllowed, match="never been changed"):
        camp.restore_revision(narration.id, 1)
    with pytest.raises(NotAllowed, match="needs its text"):
        camp.revise(narration.id, "  ")


def test_a_later_turns_record_rebuilds_the_history_it_was_shown(tmp_path):
    narrator = ScriptedNarrator([f"Landing {i} is quiet." for i in range(1, 7)])
    camp = _played(tmp_path, narrator, 6)
    sent = narrator.prompts[-1].story
    second = [e for e in camp.history() if e.kind == "narrator"][1]
    camp.revise(second.id, "Landing 2 is flooded to the knee.")
    rebuilt = camp.turn(camp.history()[-1].id).report.prompt.story
    assert rebuilt == sent
    assert "Landing 2 is quiet." in rebuilt and "flooded" not in rebuilt
    # The next turn is shown the passage as it is now.
    camp.act("I wade on")
    assert "Landing 2 is flooded to the knee." in narrator.prompts[-1].story


CUT = "You climb the stair. The lamp room door stands open and the"


def test_continue_finishes_a_cut_reply_in_the_same_passage(tmp_path):
    narrator = OpeningNarrator([CUT, " lamp burns low. Mara waits by the rail."])
    camp = _played(tmp_path, narrator, 1)
    head = camp.history()[-1]
    assert head.text == "You climb the stair." and camp.turn(head.id).cut

    turn = camp.extend()

    history = camp.history()
    assert turn.id == head.id and history[-1].id == head.id and len(history) == 3
    assert history[-1].text == ("You climb the stair. The lamp room door stands open and the lamp burns low. "
                                "Mara waits by the rail.")
    assert (turn.take, turn.takes) == (1, 1) and len(camp.takes(head.id)) == 1
    assert narrator.prompts[-1].opening == CUT  # written on from the cut, the passage itself as its opening
    assert not camp.turn(head.id).cut
    assert turn.accounting["rules"]["extended"]["node_id"] == head.id
    texts = camp.revisions(head.id)
    assert [r.reason for r in texts[:-1]] == ["continued"] and texts[0].text == "You climb the stair."
    assert len(camp.records()) == 1


def test_continue_without_an_opening_writes_on_after_the_passage(tmp_path):
    narrator = ScriptedNarrator(["The stair turns.", "Gulls wheel past the glass."])
    camp = _played(tmp_path, narrator, 1)
    head = camp.history()[-1]
    camp.extend()
    assert camp.history()[-1].id == head.id
    assert camp.history()[-1].text == "The stair turns. Gulls wheel past the glass."
    assert narrator.prompts[-1].story.count("The stair turns.") >= 1  # shown the passage it goes on from


def test_continue_needs_a_narration(tmp_path):
    wb = Workbench.open(tmp_path / "rev.db", background=False)
    wb.configure(narrator=ScriptedNarrator(), memory_enabled=False, auto_summarize=False, embedder="none")
    camp = wb.new_campaign("Rev", opening="Rain on the cliff.")
    with pytest.raises(NotAllowed, match="not a narration"):
        camp.extend()


def test_a_server_continues_a_cut_reply_after_its_last_whole_sentence(tmp_path):
    """A narrator that cannot write on from words it did not choose is shown the
    stored passage; the cut part it never saw is not glued to its reply."""
    narrator = ScriptedNarrator([CUT, "The lamp burns low."])
    camp = _played(tmp_path, narrator, 1)
    head = camp.history()[-1]
    camp.extend()
    assert camp.history()[-1].id == head.id
    assert camp.history()[-1].text == "You climb the stair. The lamp burns low."
