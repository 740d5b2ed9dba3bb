"""Clicking the app's controls drives the engine and updates the view."""
from __future__ import annotations

import pytest
from helpers import census, texts
from narrators import BlockingNarrator, FailingNarrator, ScriptedNarrator
from widget_helpers import enabled, html_values, story

from engine import NarratorUnavailable, TurnCancelled, TurnFailed, WorkbenchError
from engine.html import escape
from widgets import CampaignApp
from widgets.runner import describe_error


@pytest.fixture
def app(camp):
    return CampaignApp(camp, threaded=False)


def test_send_plays_the_input_and_shows_the_narration(app, camp):
    app.controls.text.value = "open the door"
    app.controls.send.click()
    assert texts(camp)[-2:] == ["> You open the door.", "Narration 1."]
    assert "&gt; You open the door." in story(app) and "Narration 1." in story(app)
    assert app.controls.text.value == "" and app.story.live.value == ""
    assert "Written" in app.controls.status.value


def test_continue_and_story_direction(app, camp):
    app.controls.continue_.click()
    app.controls.direction.value = True
    assert app.controls.send.description == "Direct"
    app.controls.text.value = "Make the storm break."
    app.controls.send.click()
    assert [e.kind for e in camp.history()] == ["start", "narrator", "direction", "narrator"]
    assert "Narration 2." in story(app) and "[direction]" in story(app)


def test_undo_redo_move_the_story_and_nothing_is_lost(app, camp):
    app.send("go north")
    app.controls.undo.click()
    assert "Narration 1." not in story(app) and texts(camp) == ["You stand at the mouth of a sea cave."]
    app.controls.redo.click()
    assert "Narration 1." in story(app)


def test_retry_and_the_take_selector(app, camp):
    app.send("go north")
    assert app.controls.takes.layout.display == "none"  # one take: no selector
    app.controls.retry.click()
    assert "Narration 2." in story(app) and "Narration 1." not in story(app)
    assert app.controls.takes.layout.display == "" and "2/2" in app.controls.take_label.value
    assert app.controls.next_take.disabled and not app.controls.prev_take.disabled
    app.controls.prev_take.click()
    assert "Narration 1." in story(app) and "1/2" in app.controls.take_label.value
    assert [t.text for t in camp.takes()] == ["Narration 1.", "Narration 2."]
    assert camp.history()[-1].take == 1
    app.controls.next_take.click()
    assert "Narration 2." in story(app)


def test_edit_opens_a_larger_editor_where_the_narration_stands_and_saves_a_revision(app, camp):
    app.controls.text.value = "my draft"
    app.controls.continue_.click()
    app.controls.edit.click()
    editor = app.story.editor
    assert editor.text.value == "Narration 1." and editor.widget.layout.display == ""
    assert editor.widget.layout.flex == "0 0 auto"  # never shrunk to nothing by a long story
    assert editor.text.rows >= 4 and app.controls.text.value == "my draft"  # the draft stays in its box
    assert app.controls.undo.disabled and "Finish or cancel the edit" in app.controls.undo.tooltip
    assert app.controls.send.disabled  # a turn would move the story under the open editor
    assert editor.revisions.layout.display == "none"  # no earlier text yet
    editor.text.value = "The tide comes in."
    editor.save.click()
    assert texts(camp)[-1] == "The tide comes in." and "(edited)" in story(app)
    assert camp.history()[-1].takes == 1 and editor.widget.layout.display == "none"
    assert "story after it is kept" in app.controls.status.value and app.controls.text.value == "my draft"
    app.controls.edit.click()
    assert editor.revisions.layout.display == ""  # the earlier text, offered back
    editor.revisions.value = 1
    assert editor.text.value == "Narration 1."
    app.controls.edit.click()  # the button reads Cancel edit while the editor is open
    assert editor.widget.layout.display == "none" and "cancelled" in app.controls.status.value
    assert texts(camp)[-1] == "The tide comes in."


def test_branch_from_here_keeps_the_passage_and_starts_a_new_take(app, camp):
    app.send("go in")
    app.controls.edit.click()
    app.story.editor.text.value = "The tide comes in."
    app.story.editor.branch.click()
    assert texts(camp)[-1] == "The tide comes in." and camp.history()[-1].takes == 2
    assert "Branched" in app.controls.status.value
    assert "sw-take-prev" in app.story.passages.value  # the arrows are on the passage itself
    app.keys._received(app.keys, {"action": "take", "id": camp.history()[-1].id, "step": -1}, [])
    assert texts(camp)[-1] == "Narration 1." and camp.history()[-1].take == 1
    assert "sw-take-next" in app.story.passages.value


def test_an_older_passage_edited_keeps_every_turn_after_it(app, camp):
    for line in ("go in", "go deeper", "look", "listen"):
        app.send(line)
    before = [e.id for e in camp.history()]
    first = [e for e in camp.history() if e.kind == "narrator"][0]
    app.keys._received(app.keys, {"action": "edit", "id": first.id}, [])
    app.keys._received(app.keys, {"action": "save_edit", "text": "The cave mouth breathes cold air."}, [])
    assert [e.id for e in camp.history()] == before and "Narration 4." in story(app)
    assert "The cave mouth breathes cold air." in story(app) and "Narration 1." not in story(app)


def test_any_passage_is_edited_where_it_stands(app, camp):
    """The editor opens between the passages before and after the one edited."""
    app.send("go in")
    app.send("go deeper")
    first = [e for e in camp.history() if e.kind == "narrator"][0]
    app.keys._received(app.keys, {"action": "edit", "id": first.id}, [])
    assert app.story.editor.text.value == first.text
    assert "go in" in app.story.passages.value and "go deeper" not in app.story.passages.value
    assert "go deeper" in app.story.after.value  # the rest of the story, below the editor
    app.keys._received(app.keys, {"action": "cancel_edit"}, [])  # Escape
    assert app.story.after.value == "" and "go deeper" in story(app)


def test_a_player_line_is_edited_in_place_or_branched_and_answered_afresh(app, camp):
    """Save keeps the story after the line; Branch from here has the narrator answer it
    afresh, the original line keeping its own future."""
    app.send("go in")
    app.send("go deeper")
    line = [e for e in camp.history() if e.kind == "player"][-1]
    app.keys._received(app.keys, {"action": "edit", "id": line.id}, [])
    assert app.story.editor.text.value == "> You go deeper."
    app.keys._received(app.keys, {"action": "save_edit", "text": "I go deeper still"}, [])  # Ctrl+Enter
    kinds = [(e.kind, e.text) for e in camp.history()]
    assert kinds[-2] == ("player", "> I go deeper still.") and kinds[-1] == ("narrator", "Narration 2.")
    app.keys._received(app.keys, {"action": "edit", "id": line.id}, [])
    app.story.editor.text.value = "I turn back"
    app.story.editor.branch.click()
    kinds = [(e.kind, e.text) for e in camp.history()]
    assert kinds[-2] == ("player", "> I turn back.") and kinds[-1] == ("narrator", "Narration 3.")
    assert "go deeper" not in story(app) and "I turn back" in story(app)
    assert "Written" in app.controls.status.value
    assert [t.text for t in camp.takes(line.id)] == ["> I go deeper still.", "> I turn back."]  # the original is kept


def test_controls_are_enabled_exactly_when_they_apply(app, camp):
    def check(send: bool):
        assert enabled(app) == {"send": send, "continue": True, "undo": camp.can_undo, "redo": camp.can_redo,
                                "retry": camp.can_retry, "edit": camp.can_retry, "stop": False}

    check(send=False)
    assert "Nothing to undo" in app.controls.undo.tooltip and "Nothing to retry" in app.controls.retry.tooltip
    assert "Nothing to redo" in app.controls.redo.tooltip and "Write what you do" in app.controls.send.tooltip
    app.controls.text.value = "look"
    check(send=True)
    app.controls.send.click()
    check(send=False)
    app.controls.undo.click()
    check(send=False)
    assert camp.can_redo and not camp.can_retry
    app.controls.redo.click()
    app.controls.retry.click()
    check(send=False)


def test_an_empty_send_is_refused_in_words(app, camp):
    before = texts(camp)
    app.send("   ")
    assert texts(camp) == before and "Write what you do first" in app.controls.status.value


def test_streaming_appends_to_the_live_passage_only(wb, camp):
    wb.configure(narrator=ScriptedNarrator(["The gulls wheel over the black water and cry."], reasoning="Think."))
    app = CampaignApp(camp, threaded=False)
    live, finished = [], []
    app.story.live.observe(lambda ch: live.append(ch["new"]), "value")
    app.story.passages.observe(lambda ch: finished.append(ch["new"]), "value")
    app.send("listen")
    grown = [v for v in live if v and "Waiting for the narrator" not in v]
    assert "Waiting for the narrator" in live[0]  # before the first word, it says what it waits for
    assert len(grown) >= 8  # one update per word
    assert all(len(a) < len(b) for a, b in zip(grown, grown[1:], strict=False))
    assert "The gulls wheel over the black water and cry." in grown[-1]
    assert len(finished) == 1  # the whole story is re-rendered once, when the turn is written
    assert live[-1] == "" and "The gulls wheel" in story(app)
    assert "Think." in app.story.reasoning.value and app.story.reasoning_box.layout.display == ""


def test_a_failed_turn_shows_words_not_a_traceback_and_gives_the_input_back(wb, camp):
    wb.configure(narrator=FailingNarrator())
    app = CampaignApp(camp, threaded=False)
    rows = census(wb)
    app.controls.text.value = "dive"
    app.controls.send.click()
    status = app.controls.status.value
    assert "The narrator failed mid-reply (ConnectionError: connection reset by peer)" in status
    assert "role='alert'" in status and "Nothing was written" in status
    assert census(wb) == rows and "one two" not in story(app) and app.story.live.value == ""
    assert "connection reset by peer" in app.story.notice.value  # also where the passage would have been
    assert not app.controls.text.disabled and app.controls.text.value == "dive"
    assert not app.controls.send.disabled and app.error
    assert not any("Traceback" in v for v in html_values(app))


@pytest.mark.parametrize("error, words", [
    (NarratorUnavailable("The model server at http://127.0.0.1:9/v1 is unreachable: is it running?"), "unreachable"),
    (ValueError("boom"), "(ValueError: boom)"),
])
def test_narrator_errors_are_shown_in_words(wb, camp, error, words):
    wb.configure(narrator=FailingNarrator(error, after=0))
    app = CampaignApp(camp, threaded=False)
    app.send("wait")
    assert words in app.controls.status.value and not app.controls.continue_.disabled


def test_a_window_too_small_is_refused_in_words(wb, camp):
    wb.configure(narrator=ScriptedNarrator(window=300))
    with pytest.raises(WorkbenchError) as refused:
        camp.act("wait")
    app = CampaignApp(camp, threaded=False)
    app.send("wait")
    assert escape(str(refused.value)) in app.controls.status.value and len(texts(camp)) == 1
    assert "window" in str(refused.value)


def test_errors_outside_the_engine_are_described_not_raised():
    assert describe_error(KeyError("x")) == "Something went wrong (KeyError: 'x')."
    assert describe_error(TurnCancelled("Stopped.")) == "Stopped."


def test_threaded_turn_disables_input_and_stop_cancels_it(wb, camp):
    narrator = BlockingNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    rows = census(wb)
    app.send("hold the rope")
    assert narrator.started.wait(5)
    assert app.controls.text.disabled and app.controls.send.disabled and app.controls.undo.disabled
    assert not app.controls.stop.disabled and "being narrated" in app.controls.continue_.tooltip
    assert app.save_points.create.disabled
    assert "first" in app.story.live.value
    app.controls.stop.click()
    narrator.release.set()
    assert app.wait(10)
    assert "Stopped" in app.controls.status.value and census(wb) == rows
    assert not app.controls.text.disabled and app.controls.stop.disabled
    assert app.controls.text.value == "hold the rope" and app.story.live.value == ""


def test_threaded_turn_completes_in_the_background(wb, camp):
    narrator = BlockingNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    app.controls.continue_.click()
    assert narrator.started.wait(5)
    app.controls.undo.click()  # ignored while busy, in words
    assert "being narrated" in app.controls.status.value
    narrator.release.set()
    assert app.wait(10)
    assert texts(camp)[-1] == "first second third…" and "first second third" in story(app)  # marked cut: no sentence end
    assert not app.controls.undo.disabled


def test_play_runs_scripted_inputs_to_the_end(wb, camp):
    app = CampaignApp(camp)  # threaded, as in the notebook
    app.play(["go in", "I wait"], wait=True)
    assert texts(camp)[1:] == ["> You go in.", "Narration 1.", "> I wait.", "Narration 2."]
    wb.configure(narrator=FailingNarrator())
    with pytest.raises(TurnFailed, match="failed mid-reply"):
        app.play(["dive", "never played"], wait=True)
    assert texts(camp)[-1] == "Narration 2."


def test_play_returns_at_once_and_stop_ends_the_script(wb, camp):
    """In a live notebook the kernel must stay free while scripted turns run,
    or the Stop click would never reach the app."""
    narrator = BlockingNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    rows = census(wb)
    app.play(["go in", "I wait", "I leave"])
    assert narrator.started.wait(5)  # play() came back while the first turn is still open
    assert not app.controls.stop.disabled
    app.controls.stop.click()
    narrator.release.set()
    assert app.wait(10)
    assert census(wb) == rows and len(narrator.prompts) == 1  # the stopped turn wrote nothing; the rest never ran
    assert not app.controls.send.disabled or not app.controls.text.value
    assert not app.controls.continue_.disabled and app.controls.stop.disabled


def test_a_stop_the_engine_missed_is_repeated_on_the_next_chunk(wb, camp):
    """Campaign.stop() is a no-op until the turn has registered its cancel event;
    the app repeats the request so an early Stop still stops."""
    narrator = BlockingNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    real_stop, calls = camp.stop, []
    camp.stop = lambda: calls.append(1) or (real_stop() if len(calls) > 1 else None)  # the first one is lost
    rows = census(wb)
    app.controls.continue_.click()
    assert narrator.started.wait(5)
    app.controls.stop.click()
    narrator.release.set()
    assert app.wait(10)
    assert len(calls) >= 2 and "Stopped" in app.controls.status.value and census(wb) == rows


def test_a_click_during_a_scripted_turn_does_not_end_the_script(wb, camp):
    narrator = BlockingNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    app.play(["go in", "I wait"])
    assert narrator.started.wait(5)
    app.controls.continue_.click()  # refused in words: a turn is running
    assert "being narrated" in app.controls.status.value
    narrator.release.set()
    assert app.wait(10)
    assert [t for t in texts(camp) if t.startswith(">")] == ["> You go in.", "> I wait."]


def test_story_mode_adds_the_text_as_typed(app, camp):
    """The Story mode toggle beside the input sends the text into the story
    exactly as typed; it and Story direction are never on together."""
    app.controls.direction.value = True
    app.controls.story_mode.value = True
    assert not app.controls.direction.value and "Story mode" in app.controls.text.placeholder
    app.send("The storm broke that night.\nNobody slept.")
    assert [e.text for e in camp.history() if e.kind == "player"] == ["The storm broke that night.\nNobody slept."]
