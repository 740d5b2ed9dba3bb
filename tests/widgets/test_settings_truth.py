"""Settings that tell the truth: the story budget field shows the budget of
the narrator chosen in the list (its own window while nobody has set one),
and the connection test names the window it found, or says why none was."""
from __future__ import annotations

import socket

import pytest
from fake_server import FakeServer, Script

from widgets import CampaignApp


@pytest.fixture
def settings(camp):
    app = CampaignApp(camp, threaded=False)
    return app.panel_widgets[[t for t, _ in app.panels].index("Settings")]


def test_the_budget_field_follows_the_narrator_chosen_in_the_list(settings, wb):
    assert wb.settings.follows("context_budget")
    budget, narrator = settings.controls["context_budget"], settings.controls["narrator"]
    narrator.value = "local"
    assert budget.value == wb.settings.n_ctx == 4096
    narrator.value = "endpoint"
    assert budget.value == 16384 and "your server&#39;s window" in settings.note.value
    narrator.value = "local"
    assert budget.value == 4096 and "4,096 tokens" in settings.note.value


def test_a_switch_and_apply_keeps_the_budget_following(settings, wb):
    settings.controls["narrator"].value = "endpoint"
    settings.controls["endpoint_url"].value = "http://127.0.0.1:11434/v1"
    settings.controls["model"].value = "qwen2.5:7b"
    assert "context_budget" not in settings.changes()
    settings.save()
    assert wb.settings.narrator == "endpoint" and wb.settings.follows("context_budget")
    assert wb.settings.context_budget == 16384 and settings.controls["context_budget"].value == 16384


def test_a_budget_the_reader_typed_stays_when_the_narrator_changes(settings, wb):
    budget = settings.controls["context_budget"]
    budget.value = 3000
    settings.controls["narrator"].value = "endpoint"
    assert budget.value == 3000 and settings.changes()["context_budget"] == 3000


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreached_server_says_why_no_window_was_found(settings, wb):
    wb.configure(endpoint=f"http://127.0.0.1:{_closed_port()}/v1", model="story-model")
    report = wb.test_connection()
    assert report.window_words.startswith("none found: the narrator was not reached (Could not list models")
    settings.test.click()
    assert "none found" in settings.report.value
    assert "unknown tokens" not in settings.report.value and "None;" not in settings.report.value


def test_a_found_window_is_named_and_a_silent_server_says_so(settings, wb):
    with FakeServer(Script(loaded={"story-model": 4096}, models=["story-model"])) as s:
        wb.configure(endpoint=s.base, model="story-model")
        assert wb.test_connection().window_words.startswith("4,096 tokens (")
    with FakeServer(Script(kind="plain")) as s:
        wb.configure(endpoint=s.base, model="story-model")
        words = wb.test_connection().window_words
        assert words.startswith("none found: ") and "None" not in words


def test_tables_wrap_between_words_and_scroll_when_too_wide():
    """A narrow table split "Mara" into "Mar/a": cells now wrap at spaces only."""
    from widgets.common import table_html
    from widgets.inspector import sections_table

    for table in (table_html(["title", "keys"], [["Mara", "Mara, innkeeper"]]),
                  sections_table([{"name": "imported_canon", "tokens": 12, "why": "UNTRUSTED DATA"}])):
        assert "anywhere" not in table and "break-all" not in table
        assert "word-break:normal" in table and "overflow-x:auto" in table
