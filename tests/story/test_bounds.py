"""The protected fields' bounds (engine/budget/standing.py), at every door.

A field every prompt carries whole and that is too long makes every turn
fail; so each has one bound, in tokens, checked where it enters: the engine
calls refuse it in words and write nothing, the panels show that refusal, the
settings refuse it, and an import cuts it and says so (tests/interop and
tests/bundle). With every field full the campaign still plays its first turn
at the default window, which is what the bounds were sized for.
"""
from __future__ import annotations

import pytest
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import CardRefused, NotAllowed, Workbench, WorkbenchError
from engine.budget import standing, tokens
from engine.narrative.render import render_state
from engine.store import CampaignRow, NodeRow

# Rare CJK costs ~3.9 tokens a character: past the token bound long before the
# character bound, so these values test the rule that keeps the promise.
DENSE = "".join(chr(0x20000 + i) for i in range(4000))
PROSE = ("The harbour froze in the night, and by morning the fishing boats stood in ice like flies in amber. "
         * 400)


def over(field: str, dense: bool = False) -> str:
    """A value just past `field`'s bound: prose past its tokens, or dense text
    past its tokens while short in characters."""
    bound = standing.BOUNDS[field]
    if dense:
        text = DENSE[: bound.tokens // 3 + 10]
        assert len(text) < bound.chars and tokens.count(text) > bound.tokens
        return text
    return PROSE[: bound.tokens * 5]


def dense(n: int) -> str:
    """`n` tokens of the costliest text."""
    return tokens.encoding().decode(tokens.encoding().encode(DENSE)[:n]).rstrip("\ufffd")


def full(field: str) -> str:
    """The longest value the bound admits, in the costliest text."""
    text, _ = standing.cut(field, DENSE * 3)
    assert tokens.count(text) <= standing.BOUNDS[field].tokens
    return text


@pytest.fixture
def bench(tmp_path):
    wb = Workbench.open(tmp_path / "bounds.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["The ice holds."]), embedder=BagOfWordsEmbedder())
    yield wb
    wb.close()


def campaign_count(wb) -> int:
    with wb.db.reading() as s:
        return s.query(CampaignRow).count()


# ------------------------------------------------------------------ the table
def test_every_bound_is_whole_and_sized_for_the_default_window():
    assert set(standing.STANDING) < set(standing.BOUNDS)
    for field, bound in standing.BOUNDS.items():
        assert bound.tokens > 0 and bound.chars >= bound.tokens and bound.instead, field
    from engine.settings import Settings

    assert Settings().n_ctx == standing.DEFAULT_WINDOW  # the window the bounds were sized for


def test_every_field_at_its_bound_still_plays_its_first_turn_at_the_default_window(bench):
    """The promise the bounds were sized for, in the costliest text there is:
    premise, instructions, author's note, protagonist, canon, the narrative
    state, the narrator instructions and a constant story card, each at its
    bound."""
    bench.configure(narrator_prompt=full("narrator_prompt"))
    camp = bench.new_campaign("Full", premise=full("premise"), protagonist=full("protagonist"),
                              ai_instructions=full("ai_instructions"), authors_note=full("authors_note"),
                              opening="The ice holds the boats.")
    rules, _ = standing.cut_rules([full("canon")])
    cast = {"entities": {"mara": {"type": "character", "name": "Mara", "description": dense(570)}}}
    assert 560 < tokens.count(render_state(cast)) <= standing.BOUNDS["state"].tokens  # a state at its bound
    with bench.db.writing() as s:
        s.get(CampaignRow, camp.id).canon = {"rules": rules}
        s.get(NodeRow, camp.history()[0].id).state_after = cast  # the state a character card's import makes
    camp.add_story_card("Ice", keys=["ice"], entry=full("card_entry"), constant=True)
    assert bench.settings.context_budget == standing.DEFAULT_WINDOW
    report = camp.context("I test the ice.")
    spent = report["tokens"]
    assert spent["budget"] == standing.DEFAULT_WINDOW and spent["available_for_history"] > 200, spent
    names = {s["name"] for s in report["sections"]}
    assert {"premise", "ai_instructions", "protagonist", "campaign_canon", "narrator_rules", "narrative_state"} <= names
    assert report["authors_note"]["tokens"] > standing.BOUNDS["authors_note"].tokens - 20
    assert camp.act("I test the ice.").text == "The ice holds."


# ------------------------------------------------------------------ engine calls
@pytest.mark.parametrize("field", ["premise", "protagonist", "ai_instructions", "authors_note"])
@pytest.mark.parametrize("dense", [False, True], ids=["prose", "dense"])
def test_new_campaign_refuses_an_over_long_field_in_words_and_makes_nothing(bench, field, dense):
    before = campaign_count(bench)
    with pytest.raises(NotAllowed) as caught:
        bench.new_campaign("Too long", **{field: over(field, dense)})
    message = str(caught.value)
    label = standing.BOUNDS[field].label
    assert message.startswith(f"{label}: ") and "past its bound of" in message and "tokens" in message
    assert message.endswith("No campaign was made.")
    assert campaign_count(bench) == before


def test_new_campaign_takes_a_field_at_its_bound(bench):
    camp = bench.new_campaign("At the bound", premise=full("premise"), authors_note=full("authors_note"))
    assert camp.authors_note == full("authors_note")


@pytest.mark.parametrize("dense", [False, True], ids=["prose", "dense"])
def test_set_authors_note_refuses_an_over_long_note_and_keeps_the_old_one(bench, dense):
    camp = bench.new_campaign("Note", authors_note="Keep it cold.")
    with pytest.raises(NotAllowed, match="The author's note: .* past its bound of 250 tokens") as caught:
        camp.set_authors_note(over("authors_note", dense))
    assert "story card" in str(caught.value) and str(caught.value).endswith("Nothing was changed.")
    assert camp.authors_note == "Keep it cold."
    assert camp.set_authors_note(full("authors_note")) == full("authors_note")


def test_a_story_card_over_its_bound_is_refused_when_added_or_edited(bench):
    camp = bench.new_campaign("Cards")
    with pytest.raises(CardRefused, match="A story card's text: .* past its bound of 960 tokens"):
        camp.add_story_card("Harbour", keys=["harbour"], entry=over("card_entry"))
    assert camp.story_cards().empty
    card = camp.add_story_card("Harbour", keys=["harbour"], entry="Ice closes it in winter.")
    with pytest.raises(CardRefused, match="Nothing was written"):
        camp.edit_story_card(card, entry=over("card_entry", dense=True))
    assert camp.story_cards()["entry"].tolist() == ["Ice closes it in winter."]


@pytest.mark.parametrize("dense", [False, True], ids=["prose", "dense"])
def test_the_settings_refuse_over_long_narrator_instructions(bench, dense):
    before = bench.settings.narrator_prompt
    with pytest.raises(WorkbenchError, match="Settings not changed: narrator_prompt must be at most 300 tokens"):
        bench.configure(narrator_prompt=over("narrator_prompt", dense))
    assert bench.settings.narrator_prompt == before
    bench.configure(narrator_prompt=full("narrator_prompt"))
    assert bench.settings.narrator_prompt == full("narrator_prompt")


# ------------------------------------------------------------------ the panel
def test_the_lore_panel_shows_the_refusal_and_keeps_the_note(bench):
    from widgets.lore_panel import LorePanel

    camp = bench.new_campaign("Panel", authors_note="Keep it cold.")
    panel = LorePanel(camp)
    panel.note.value = over("authors_note")
    panel.set_note()
    assert "past its bound of 250 tokens" in panel.note_message.value and "b00020" in panel.note_message.value
    assert camp.authors_note == "Keep it cold."
    panel.card_title.value, panel.card_keys.value, panel.text.value = "Harbour", "harbour", over("card_entry")
    panel.save_card()
    assert "past its bound of 960 tokens" in panel.message.value and camp.story_cards().empty
