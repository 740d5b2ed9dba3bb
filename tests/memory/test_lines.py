"""Every played line is a recall unit: found by the search layer once it has
left the history window, never while it is in it, and gone with its lineage
(Undo, a retry, a fork). Real SQLite files and the real embedded MiniLM."""
import pytest

from engine import Workbench
from engine.context import Report
from engine.memory.lines import path_lines
from engine.providers import Text, Usage
from engine.store import CampaignRow
from engine.story import StoryTree

pytestmark = pytest.mark.realmodel

FILLER = [
    "The road bends past a row of hawthorn hedges and a gate left open.",
    "Rain starts, thin and cold, and the ditches fill with brown water.",
    "A cart loaded with turnips rattles by; the driver nods and does not stop.",
    "Smoke rises from a chimney far off across the wet fields.",
    "Crows argue on a fence post, then lift away all at once.",
    "The mud sucks at your boots with every step along the lane.",
]
PLANTED = "The ferryman at Ashwater is a one-eyed man called Pell, who takes a silver ring as his fare."


class StoryNarrator:
    """Replies with the next line of a script to story prompts, and with a
    plain sentence to memory and summary requests."""

    model_id = "scripted-lines"

    def __init__(self, replies):
        self.replies = list(replies)
        self.turn = 0

    def context_window(self):
        from engine.providers.window import LOADED, Window

        return Window(8192, LOADED, detail="scripted", reachable=True)

    def execute(self, prompt):
        if prompt.task in ("memory", "summary"):
            yield Text("The road went on.")
            return
        reply = self.replies[self.turn % len(self.replies)]
        self.turn += 1
        yield Text(reply)
        yield Usage(prompt_tokens=10, completion_tokens=len(reply.split()))


def _campaign(tmp_path, replies, budget=1024):
    wb = Workbench.open(tmp_path / "lines.db", background=False)
    wb.configure(narrator=StoryNarrator(replies), embedder="local", context_budget=budget, max_output_tokens=64,
                 auto_summarize=False, state_protocol=False)
    camp = wb.new_campaign("Lanes", premise="A courier walks the lanes.", protagonist="Wren",
                           opening="Wren sets out at dawn.")
    return wb, camp


def _memories(report) -> str:
    return Report(report).memories_text


def _walk(camp, turns: int, words: str = "walk on along the lane past milestone", start: int = 0) -> None:
    """Turns of filler that carry the story's early lines out of the window."""
    for i in range(start, start + turns):
        camp.act(f"{words} {i}")

def test_a_line_that_left_the_window_is_recalled_and_one_inside_it_is_not(tmp_path):
    wb, camp = _campaign(tmp_path, [PLANTED] + FILLER * 6)
    camp.act("I ask at the harbour about crossing the estuary")
    early = _memories(camp.context("I walk down to the ferry at Ashwater and look for the ferryman"))
    assert "Pell" not in early  # still in the history window: the story itself is there
    _walk(camp, 24)
    report = camp.context("I walk down to the ferry at Ashwater and look for the ferryman")
    history = Report(report).history_text
    assert "Pell" not in history  # it has left the window
    assert "one-eyed man called Pell" in _memories(report)
    lines = [u for u in report["memories"]["used"] if u["unit"] == "line"]
    oldest = report["history"]["total"] - report["history"]["included"]
    assert lines and all(u["start"] < oldest for u in lines)


def test_undo_and_retry_take_their_lines_with_them(tmp_path):
    wb, camp = _campaign(tmp_path, FILLER * 8)
    _walk(camp, 3, "walk on past milestone")
    camp.act("I bury the copper astrolabe under the crooked yew")
    _walk(camp, 22, start=3)
    asked = "I dig under the crooked yew for the astrolabe"
    assert "copper astrolabe" in _memories(camp.context(asked))
    for _ in range(23):
        camp.undo()  # back to before the line was played
    camp.act("I rest under the crooked yew")
    _walk(camp, 22, "walk on along the lane past post")
    assert "copper astrolabe" not in _memories(camp.context(asked))
    with wb.db.reading() as s:
        campaign = s.get(CampaignRow, camp.id)
        texts = [line.text for line in path_lines(s, camp.id, StoryTree(s, campaign).path())]
    assert not any("astrolabe" in t for t in texts)
    # A retried reply: the take replaced is not recalled, the new one is.
    camp.retry()
    with wb.db.reading() as s:
        campaign = s.get(CampaignRow, camp.id)
        on_path = [line.node_id for line in path_lines(s, camp.id, StoryTree(s, campaign).path())]
    assert camp.history()[-1].id in on_path and len(set(on_path)) == len(on_path)


def test_a_dated_session_line_is_carried_by_the_lines_after_it(tmp_path):
    wb, camp = _campaign(tmp_path, ["Session two begins. 8 May 2023.",
                                    "Caroline nods: she went to the support group yesterday."] + FILLER * 6)
    camp.act("Session two")
    camp.act('Caroline: "I went to the LGBTQ support group yesterday."')
    _walk(camp, 24)
    report = camp.context("When did Caroline go to the LGBTQ support group?")
    memories = _memories(report)
    assert "[8 May 2023]" in memories and "yesterday (7 May 2023)" in memories


def test_an_earlier_summary_is_recalled_and_goes_with_its_lineage(tmp_path):
    """A summary the story has moved past is a recall unit: found by what it
    says once a newer summary replaced it, and gone when an Undo takes the
    story back before it was written."""
    wb, camp = _campaign(tmp_path, FILLER * 8)
    _walk(camp, 3, "walk on past milestone")
    camp.set_summary("Wren paid the toll-keeper at Harrowgate bridge with a cracked opal brooch.")
    _walk(camp, 4, "walk on along the lane past post")
    camp.set_summary("Wren walks the lanes toward the coast in the rain.")
    asked = "I look for the toll-keeper at Harrowgate bridge who took my opal brooch"
    report = camp.context(asked)
    summaries = [u for u in report["memories"]["used"] if u["unit"] == "summary"]
    assert summaries and "cracked opal brooch" in _memories(report)
    assert "opal" not in camp.summary  # the current summary says nothing of it
    for _ in range(5):
        camp.undo()  # back before the first summary was written
    camp.act("I sit on a milestone and rest")
    after = camp.context(asked)
    assert "cracked opal brooch" not in _memories(after)
    assert not [u for u in after["memories"]["used"] if u["unit"] == "summary"]


def test_the_next_prompt_holds_the_memories_the_one_before_showed(tmp_path):
    """Played turns keep the recalled units in place; a dry run can be asked
    to follow any earlier prompt's (camp.context(held=...))."""
    wb, camp = _campaign(tmp_path, [PLANTED] + FILLER * 6)
    _walk(camp, 24)
    played = Report(camp.turn(camp.history()[-1].id).report)
    following = Report(camp.context("walk on along the lane past the mill"))
    # The newest turn's memories come again unchanged unless they had to be chosen afresh.
    if following["held"]["held"]:
        assert following.section("memories").text == played.section("memories").text
        assert following["held"]["anchor"] == played["held"]["anchor"]
    else:
        assert following["held"]["why"]
    asked = "I walk down to the ferry at Ashwater and look for the ferryman"
    first = Report(camp.context(asked, held={}))
    assert not first["held"]["held"] and first["held"]["why"] == "nothing held before"
    again = Report(camp.context(asked, held=first["held"]))
    assert again["held"]["held"] and again.section("memories").text == first.section("memories").text
    assert "one-eyed man called Pell" in again.memories_text
