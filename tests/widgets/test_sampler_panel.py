"""The sampler controls in the Settings panel: empty is "not set" (nothing is
sent), a number is checked against its bounds, and Reset samplers clears them."""
from __future__ import annotations

import pytest

from widgets import CampaignApp


@pytest.fixture
def settings(camp):
    app = CampaignApp(camp, threaded=False)
    return app.panel_widgets[[t for t, _ in app.panels].index("Settings")]


def test_samplers_are_empty_until_set_then_applied_and_reset(settings, wb):
    c = settings.controls
    assert [c[n].value for n in ("top_p", "min_p", "repeat_penalty", "stop_strings")] == ["", "", "", ""]
    assert "not set" in c["top_p"].placeholder
    c["top_p"].value = "0.9"
    c["repeat_penalty"].value = "3"
    c["stop_strings"].value = r"\n> | THE END"
    settings.save()
    assert wb.settings.top_p == 0.9 and wb.settings.repeat_penalty == 2.0 and wb.settings.min_p is None
    assert "Repetition penalty 3 is more than the most it can be" in settings.message.value
    assert c["repeat_penalty"].value == "2"
    settings.reset_sampling.click()
    assert (wb.settings.top_p, wb.settings.repeat_penalty, wb.settings.stop_strings) == (None, None, "")
    assert c["top_p"].value == "" and "Samplers reset" in settings.message.value


def test_a_sampler_that_is_not_a_number_is_refused_in_words(settings, wb):
    settings.controls["min_p"].value = "lots"
    settings.save()
    assert "Min-p must be a number" in settings.message.value and wb.settings.min_p is None
