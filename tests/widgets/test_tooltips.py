"""Every control says what it does, or why it cannot be used now, in the
words of the mode it is in."""
from __future__ import annotations

import pytest

from widgets import CampaignApp
from widgets.controls import TIPS, WHY_NOT


@pytest.fixture
def app(camp):
    return CampaignApp(camp, threaded=False)


def test_send_says_what_it_will_do_in_each_mode(app):
    c = app.controls
    c.text.value = "go north"
    assert c.send.tooltip == TIPS["send"]
    c.direction.value = True
    assert c.send.description == "Direct" and c.send.tooltip == TIPS["direct"]
    c.text.value = ""
    assert c.send.disabled and c.send.tooltip == WHY_NOT["direct"]


def test_edit_mode_relabels_and_retells(app):
    app.send("go north")
    c = app.controls
    c.edit.click()
    assert c.edit.description == "Cancel edit" and c.edit.tooltip == TIPS["cancel_edit"]
    assert c.send.disabled and c.send.tooltip == "Finish or cancel the edit first."
    assert "Escape" in TIPS["cancel_edit"] and "Ctrl+Enter" in app.story.editor.save.tooltip


def test_the_shortcuts_are_in_the_tooltips(app):
    c = app.controls
    c.text.value = "look"
    assert "Enter" in c.send.tooltip and "Shift+Enter" in c.send.tooltip
    assert "Escape" in TIPS["stop"] and "Enter sends" in c.text.placeholder


def test_save_points_say_why_they_wait_and_hold_during_an_edit(app, camp):
    bar = app.save_points
    assert bar.create.disabled and bar.create.tooltip == "Type a name for the save point first."
    app.send("go north")
    bar.name.value = "at the door"
    bar.create.click()
    assert not bar.restore.disabled and not bar.delete.disabled
    label = bar.choice.label
    assert label.startswith("at the door · saved ") and "depth" not in label
    app.controls.edit.click()
    assert bar.restore.disabled and bar.delete.disabled
    assert bar.restore.tooltip == "Finish or cancel the edit first."
    app.controls.edit.click()  # Cancel edit
    assert not bar.restore.disabled
