"""Each panel does from the app what the Python API does: settings, memory,
knowledge and state, with refusals in words and imported text kept inert."""
from __future__ import annotations

import datetime

import pytest
from helpers import texts
from narrators import ScriptedNarrator
from widget_helpers import assert_inert

from widgets import CampaignApp
from widgets.state_panel import event_from_form

EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture
def app(camp):
    return CampaignApp(camp, threaded=False)


def panel(app, title):
    return app.panel_widgets[[t for t, _ in app.panels].index(title)]


# ------------------------------------------------------------------ settings
def test_settings_offer_what_a_player_changes_and_apply_them(app, wb):
    settings = panel(app, "Settings")
    c = settings.controls
    c["max_output_tokens"].value, c["temperature"].value, c["trim_fraction"].value = 150, 0.5, 0
    c["memory_enabled"].value, c["state_protocol"].value, c["embedder"].value = False, False, "none"
    settings.apply.click()
    s = wb.settings
    assert (s.max_output_tokens, s.temperature, s.trim_fraction, s.memory_enabled, s.state_protocol, s.embedder) == \
        (150, 0.5, 0, False, False, "none")
    assert "Saved:" in settings.message.value


def test_the_relevance_model_is_offered_and_keeps_following_until_chosen(app, wb):
    settings = panel(app, "Settings")
    c = settings.controls
    assert c["relevance_model"].value == wb.settings.relevance_model  # what is installed here
    assert {"mpnet", "minilm"} <= {value for _, value in c["relevance_model"].options}
    c["temperature"].value = 0.6
    settings.apply.click()  # another setting saved: the relevance model still follows what is installed
    assert wb.settings.follows("relevance_model")
    c["relevance_model"].value = "minilm"
    settings.apply.click()
    assert wb.settings.relevance_model == "minilm" and not wb.settings.follows("relevance_model")


def test_endpoint_fields_show_only_for_a_server(app):
    c = panel(app, "Settings").controls
    assert c["endpoint_url"].layout.display == "none" and c["model"].layout.display == "none"
    c["narrator"].value = "endpoint"
    assert c["endpoint_url"].layout.display == "" and c["model"].layout.display == ""
    c["narrator"].value, c["embedder"].value = "local", "endpoint"
    assert c["endpoint_url"].layout.display == "" and c["embedding_model"].layout.display == ""
    c["embedder"].value = "gguf"
    assert c["embedding_model_path"].layout.display == "" and c["embedding_model"].layout.display == "none"


def test_a_gguf_embedder_without_its_file_is_refused_in_words(app, wb):
    settings = panel(app, "Settings")
    settings.controls["embedder"].value = "gguf"
    settings.apply.click()
    assert settings.controls["embedding_model_path"].layout.display == ""  # the field it needs is shown
    assert "fill in Embedding GGUF" in settings.message.value and "role='alert'" in settings.message.value
    assert wb.settings.embedder == "local"


def test_a_new_save_clears_the_old_connection_report(app):
    settings = panel(app, "Settings")
    settings.test.click()
    assert "reachable" in settings.report.value
    settings.controls["temperature"].value = 1.1
    settings.apply.click()
    assert settings.report.value == ""


def test_a_fresh_setup_never_contradicts_itself(app, wb):
    """The story budget follows the embedded model's window: no 'less than the budget' on defaults."""
    wb.configure(narrator=ScriptedNarrator(window=4096))  # the embedded model's window
    assert wb.settings.context_budget == wb.settings.n_ctx == 4096 and wb.settings.follows("context_budget")
    settings = panel(app, "Settings")
    settings.test.click()
    assert "less than" not in settings.report.value and "#a15c00" not in settings.report.value
    assert "follows the model window (4,096 tokens)" in settings.note.value


def test_a_following_budget_over_a_smaller_window_is_said_plainly(app, wb):
    wb.configure(narrator=ScriptedNarrator(window=2048))
    settings = panel(app, "Settings")
    settings.test.click()
    assert "follows the window: prompts are built to its 2,048 tokens" in settings.report.value
    assert "#a15c00" not in settings.report.value


def test_a_window_smaller_than_a_set_budget_is_a_note_not_a_warning(app, wb):
    wb.configure(narrator=ScriptedNarrator(window=4096), context_budget=16384)  # set by hand
    settings = panel(app, "Settings")
    settings.refresh()  # configured in code after the panel opened
    settings.test.click()
    assert "Note:" in settings.report.value and "#a15c00" not in settings.report.value
    assert "4,096" in settings.report.value and settings.note.value == ""


# ------------------------------------------------------------------ memory
def test_memory_add_edit_pin_delete_from_the_panel(app, camp):
    app.send("go in")
    memory = panel(app, "Memory")
    memory.text.value = "Ila owes the keeper a favour."
    memory.save.click()
    frame = camp.memories.frame()
    assert list(frame["text"]) == ["Ila owes the keeper a favour."] and memory.text.value == ""
    memory_id = int(frame["id"].iloc[0])
    assert "Ila owes the keeper a favour." in memory.listing.value
    memory.choice.value = memory_id
    assert memory.text.value == "Ila owes the keeper a favour." and memory.save.description == "Save text"
    memory.text.value = "Ila owes the keeper two favours."
    memory.save.click()
    memory.pin.click()
    frame = camp.memories.frame()
    assert frame["text"].iloc[0] == "Ila owes the keeper two favours." and bool(frame["pinned"].iloc[0])
    assert memory.pin.description == "Unpin"
    memory.delete.click()
    assert camp.memories.frame().shape[0] == 1  # nothing yet: it asks first
    memory.confirm.yes.click()
    assert camp.memories.frame().empty and "deleted" in memory.message.value


def test_memory_refusals_are_words_and_a_refresh_keeps_a_draft(app, camp):
    memory = panel(app, "Memory")
    memory.text.value = "   "
    memory.save.click()
    assert "needs some text" in memory.message.value and "role='alert'" in memory.message.value
    memory.text.value = "half a thought"
    app.send("go in")  # a turn refreshes every panel
    assert memory.text.value == "half a thought"


def test_memory_text_is_inert(app, camp):
    app.send("go in")
    camp.memories.add(EVIL)
    memory = panel(app, "Memory")
    memory.refresh()
    assert "&lt;script&gt;" in memory.listing.value
    assert_inert(memory.listing.value)


# ------------------------------------------------------------------ knowledge
def test_knowledge_upload_class_switch_and_remove(app, camp):
    knowledge = panel(app, "Knowledge")
    knowledge.upload.value = ({"name": "harbour.md", "type": "text/markdown", "size": 60,
                               "content": memoryview(b"# Harbour\n\nThe harbour chain is raised at dusk.\n"),
                               "last_modified": datetime.datetime(2026, 1, 1)},)
    knowledge.new_class.value = "canon"
    knowledge.add.click()
    sources = camp.knowledge.list()
    assert list(sources["class"]) == ["canon"] and "Added" in knowledge.message.value
    source = int(sources.index[0])
    assert knowledge.choice.value == source and "harbour" in knowledge.listing.value.lower()
    knowledge.klass.value = "inspiration"
    assert camp.knowledge.list().loc[source, "class"] == "inspiration"
    knowledge.enabled.value = False
    assert not bool(camp.knowledge.list().loc[source, "enabled"]) and "switched off" in knowledge.message.value
    knowledge.remove.click()
    knowledge.confirm.yes.click()
    assert camp.knowledge.list().empty and "removed" in knowledge.message.value


def test_knowledge_refusals_are_words(app):
    knowledge = panel(app, "Knowledge")
    knowledge.add.click()
    assert "Choose a .md or .txt file first" in knowledge.message.value
    knowledge.add_upload("empty.md", b"")
    assert "role='alert'" in knowledge.message.value


def test_knowledge_titles_are_inert(app, camp):
    knowledge = panel(app, "Knowledge")
    knowledge.add_upload(EVIL + ".md", b"# " + EVIL.encode() + b"\n\nSome lore about the harbour.\n")
    assert "Added" in knowledge.message.value and "&gt;" in knowledge.message.value  # shown, as text
    for html in (knowledge.listing.value, knowledge.message.value, knowledge.status.value):
        assert_inert(html)


# ------------------------------------------------------------------ state
def test_a_state_correction_from_the_form(app, camp):
    app.send("go in")
    state = panel(app, "State")
    state.kind.value = "create_entity"
    assert set(state.fields) >= {"entity", "name", "description"}
    state.fields["entity"].value, state.fields["name"].value = "mara", "Mara"
    state.note.value = "she was there all along"
    state.apply.click()
    assert "Applied 1 correction" in state.message.value
    assert "Mara" in state.body.value
    events = camp.events()
    assert events["source"].iloc[-1] == "correction" and events["note"].iloc[-1] == "she was there all along"
    assert texts(camp)[-1] == "Narration 1."  # the story is untouched


def test_a_refused_correction_says_why(app, camp):
    app.send("go in")
    state = panel(app, "State")
    state.kind.value = "set_possession"
    state.fields["item"].value, state.fields["owner"].value = "lamp", "nobody-known"
    state.apply.click()
    assert "role='alert'" in state.message.value and "Nothing was corrected" in state.message.value


def test_the_form_reads_lists_and_plain_values():
    assert event_from_form("set_scene", {"summary": "At the pier", "present": "mara, ila ,", "location": ""}) == \
        {"type": "set_scene", "summary": "At the pier", "present": ["mara", "ila"]}
    assert event_from_form("add_fact", {"predicate": "tide height", "value": "3"})["value"] == 3
    assert event_from_form("add_fact", {"predicate": "sealed", "value": "true"})["value"] is True
    assert event_from_form("add_fact", {"predicate": "p", "value": "low"})["value"] == "low"
