"""The app says what is happening: what it waits for before the first word,
and why a turn failed, with the controls back afterwards."""
from __future__ import annotations

import time

from helpers import census
from narrators import FailingNarrator, StatusNarrator
from widget_helpers import assert_inert, enabled

from engine import TurnFailed
from widgets import CampaignApp


def test_before_the_first_word_the_story_says_what_it_is_waiting_for(wb, camp):
    narrator = StatusNarrator("Reading 1,234 prompt tokens…")
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    app.controls.continue_.click()
    assert narrator.announced.wait(5)
    deadline = time.monotonic() + 5
    while "Reading 1,234 prompt tokens" not in app.story.live.value and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "Reading 1,234 prompt tokens" in app.story.live.value
    assert app.story.waiting == "Reading 1,234 prompt tokens…"
    narrator.release.set()
    assert app.wait(10)
    assert app.story.waiting is None and app.story.live.value == ""
    assert "The lamp turns." in app.story.passages.value


def test_a_slow_start_counts_its_seconds(wb, camp):
    narrator = StatusNarrator()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp)
    app.controls.continue_.click()
    assert narrator.announced.wait(5)
    time.sleep(1.3)  # one tick of the waiting clock
    assert "Loading the embedded model… · 1 s since you sent" in app.story.live.value
    narrator.release.set()
    assert app.wait(10)


def test_a_status_with_markup_stays_text(wb, camp):
    narrator = StatusNarrator("<img src=x onerror=alert(1)> loading")
    narrator.release.set()
    wb.configure(narrator=narrator)
    app = CampaignApp(camp, threaded=False)
    seen = []
    app.story.live.observe(lambda ch: seen.append(ch["new"]), "value")
    app.controls.continue_.click()
    waiting = [v for v in seen if "loading" in v]
    assert waiting and all("&lt;img" in v for v in waiting)
    for value in waiting:
        assert_inert(value)


def test_a_crashed_narrator_shows_its_message_and_gives_the_controls_back(wb, camp):
    crash = TurnFailed("The embedded model crashed (exit code -11); nothing was written. "
                       "The next turn starts it again.")
    wb.configure(narrator=FailingNarrator(crash, after=1))
    app = CampaignApp(camp)
    rows = census(wb)
    app.controls.text.value = "climb"
    app.controls.send.click()
    assert app.wait(10)
    assert census(wb) == rows
    assert "The embedded model crashed" in app.story.notice.value
    assert "role='alert'" in app.story.notice.value
    assert "The embedded model crashed" in app.controls.status.value
    assert enabled(app)["send"] and enabled(app)["continue"] and not enabled(app)["stop"]
    assert app.story.live.value == ""
    app.controls.text.value = "climb again"
    wb.configure(narrator=StatusNarrator())
    wb.narrator.release.set()
    app.controls.send.click()  # the next turn clears the old failure
    assert app.wait(10) and app.story.notice.value == ""
