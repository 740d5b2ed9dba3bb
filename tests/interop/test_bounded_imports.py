"""Every importer cuts a protected field past its bound, names the cut with
its size in the report, and leaves a campaign that plays at the default window.

An AI Dungeon scenario with a 300,000-character author's note once imported
as "ok" and then failed every turn with ContextOverflow (38,718 protected
tokens). Each case here is a real file (tests/data/interop) or the scenario
shape AI Dungeon exports, with one field made huge; the campaign it lands is
then asked for its next prompt at the default 4,096-token window and plays a
turn with the test narrator.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import ContextOverflow
from engine.budget import standing, tokens

DATA = Path(__file__).parents[1] / "data" / "interop"
HUGE = "The tide turns at dusk and the ferry does not run. " * 6000  # 306,000 characters


def raw(name: str):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def plays(wb, report) -> None:
    """The next prompt builds at the default window, and a turn is played."""
    camp = wb.campaign(report.campaign_id)
    assert wb.settings.context_budget == standing.DEFAULT_WINDOW
    try:
        built = camp.context("I look around.")
    except ContextOverflow as exc:  # the failure this file exists for, said plainly
        pytest.fail(f"imported but cannot play: {exc}")
    assert built["tokens"]["available_for_history"] > 0
    assert camp.act("I look around.").text


def cut_named(report, words: str, size: int) -> str:
    line = next((r for r in report.repaired if words in r), None)
    assert line is not None, report.repaired
    assert f"{size:,} characters" in line and "past its bound of" in line and "cut to its first" in line, line
    return line


def scenario(**fields) -> dict:
    return {"title": "Salt and Iron", "prompt": "You wake in a cold harbour.", "memory": "The harbour froze.",
            "authorsNote": "Tone: cold.", "aiInstructions": "Be terse.",
            "storyCards": [{"keys": "forge", "value": "The forge never goes out.", "title": "Forge"}], **fields}


def test_an_ai_dungeon_scenario_with_a_300000_character_authors_note_imports_cut_and_plays(fresh):
    note = ("Keep the tone cold and the sentences short. " * 6900)[:300_000]
    report = fresh.import_ai_dungeon(scenario(authorsNote=note))
    line = cut_named(report, "the author's note", 300_000)
    assert "250 tokens" in line
    kept = fresh.campaign(report.campaign_id).authors_note
    assert note.startswith(kept) and tokens.count(kept) <= 250 and len(kept) > 900
    plays(fresh, report)


@pytest.mark.parametrize("field, words", [("memory", "the premise"), ("aiInstructions", "the AI instructions")])
def test_ai_dungeon_memory_and_instructions_are_cut_too(fresh, field, words):
    report = fresh.import_ai_dungeon(scenario(**{field: HUGE}))
    cut_named(report, words, len(HUGE))
    plays(fresh, report)


def test_an_ai_dungeon_card_past_its_bound_is_cut_naming_the_card(fresh):
    report = fresh.import_ai_dungeon(scenario(storyCards=[{"keys": "forge", "value": HUGE, "title": "Forge"}]))
    cut_named(report, "the text of story card “Forge”", len(HUGE))
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert tokens.count(cards["entry"][0]) <= standing.BOUNDS["card_entry"].tokens
    plays(fresh, report)


def test_a_sillytavern_book_with_a_huge_entry_is_cut_naming_the_entry(fresh):
    book = raw("sillytavern-eldoria-2024.json")
    first = next(iter(book["entries"].values()))
    first["content"], first["constant"] = HUGE, True
    report = fresh.import_sillytavern(book)
    cut_named(report, "the text of story card", len(HUGE))
    plays(fresh, report)


@pytest.mark.parametrize("field, words", [("system_prompt", "the AI instructions"),
                                          ("post_history_instructions", "the author's note"),
                                          ("scenario", "the premise"),
                                          ("description", "Seraphina's description in the narrative state")])
def test_a_character_card_with_a_huge_field_is_cut_and_plays(fresh, field, words):
    card = raw("v2-seraphina.json")
    card["data"][field] = HUGE
    report = fresh.import_file(card)
    size = len(HUGE) if field != "description" else len("\n\n".join(
        t for t in (HUGE, card["data"]["personality"]) if t.strip()))
    cut_named(report, words, size)
    plays(fresh, report)


def test_a_character_card_as_premise_is_cut_and_plays(fresh):
    card = raw("v2-seraphina.json")
    card["data"]["description"] = HUGE
    report = fresh.import_file(card, character_as="premise")
    premise = "\n\n".join(t for t in (HUGE, card["data"]["personality"], card["data"]["scenario"]) if t.strip())
    cut_named(report, "the premise", len(premise))
    plays(fresh, report)


@pytest.mark.parametrize("field, words", [("memory", "the premise"), ("authorsnote", "the author's note")])
def test_a_koboldai_save_with_a_huge_field_is_cut_and_plays(fresh, field, words):
    save = raw("koboldai-half-life-2.json")
    save[field] = HUGE
    report = fresh.import_file(save)
    cut_named(report, words, len(HUGE))
    plays(fresh, report)


def test_a_novelai_lorebook_with_a_huge_entry_is_cut(fresh):
    book = json.loads((DATA / "novelai-test-with-keys.lorebook").read_text(encoding="utf-8"))
    book["entries"][0]["text"] = HUGE
    report = fresh.import_file(book)
    cut_named(report, "the text of story card", len(HUGE))
    plays(fresh, report)


def test_a_risuai_lorebook_with_a_huge_entry_is_cut(fresh):
    book = raw("risuai-airisu-lorebook.json")
    entry = next(e for e in book if e.get("mode") != "folder")
    entry["content"] = HUGE
    report = fresh.import_file({"type": "risu", "ver": 1, "data": book})
    cut_named(report, "the text of story card", len(HUGE))
    plays(fresh, report)


def test_cards_added_to_an_existing_campaign_are_cut_too(fresh):
    camp = fresh.new_campaign("Harbour", opening="The ice holds.")
    report = fresh.import_ai_dungeon([{"keys": "ice", "value": HUGE, "title": "Ice"}], campaign_id=camp.id)
    cut_named(report, "the text of story card “Ice”", len(HUGE))
    assert tokens.count(camp.story_cards()["entry"][0]) <= standing.BOUNDS["card_entry"].tokens


def test_real_files_within_their_bounds_are_not_cut(fresh):
    """The bounds were chosen above what real files carry: Seraphina's 700-token
    portrait as the premise, Eldoria's longest entry (376 tokens)."""
    for source, options in ((DATA / "v2-seraphina.json", {"character_as": "premise"}),
                            (DATA / "sillytavern-eldoria-2024.json", {}), (DATA / "koboldai-half-life-2.json", {})):
        report = fresh.import_file(source, **options)
        assert not [r for r in report.repaired if "past its bound" in r], report.repaired
