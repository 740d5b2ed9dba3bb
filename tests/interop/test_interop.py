"""Files from other tools: AI Dungeon scenarios and story cards, SillyTavern
World Info. Each arrives as far as our model allows, and the report lists
what could not be carried."""
import json

import pytest
from sqlalchemy import select

from engine.bundle import BundleRefused
from engine.knowledge import Library
from engine.store.knowledge_tables import KnowledgeSourceRow

SCENARIO = {
    "title": "The Drowned Bell",
    "description": "A bell rings under the sea.",
    "prompt": "You are ${Your name?}, a ${Your trade?} in Westhaven. The bell has rung for ${Days?} days.",
    "memory": "${Your name?} is a diver. Westhaven is under quarantine.",
    "authorsNote": "Tone: damp dread.",
    "storyCards": [
        {"keys": "Mara, innkeeper", "value": "Mara keeps the Crooked Lantern; she hates ${Your name?}.",
         "type": "character", "title": "Mara", "description": "met in chapter one"},
        {"keys": "bell", "value": "The drowned bell hangs in the sunken chapel.", "type": "location",
         "title": "The bell"},
    ],
    "options": [{"title": "As a priest"}],
    "gameCodeOnInput": "const modifier = (text) => ({text}); modifier(text)",
    "tags": ["horror"],
}

WORLD_INFO = {
    "name": "Westhaven lore",
    "entries": {
        "1": {"uid": 1, "key": ["abbey", "crypt"], "keysecondary": ["north"], "comment": "The abbey crypt",
              "content": "The crypt lies under the north chapel; its keystone bears a broken circle.",
              "constant": False, "selective": True, "order": 100, "position": 0, "disable": False},
        "0": {"uid": 0, "key": ["Mara"], "keysecondary": [], "comment": "Mara",
              "content": "Mara keeps the Crooked Lantern and buried her brother in secret.",
              "constant": True, "order": 50, "position": 1, "disable": False},
        "2": {"uid": 2, "key": ["plague"], "comment": "Old draft", "content": "The plague came by ship.",
              "disable": True},
    },
}

CHARACTER_BOOK = {"character_book": {"name": "Mara's book", "entries": [
    {"keys": ["lantern"], "secondary_keys": [], "content": "The Crooked Lantern never closes.", "name": "Lantern",
     "enabled": True, "insertion_order": 10},
    {"keys": ["cellar"], "content": "Nobody goes in the cellar.", "comment": "Cellar", "enabled": False},
]}}


# ------------------------------------------------------------------ AI Dungeon
def test_a_scenario_becomes_a_campaign_with_its_placeholders_filled(fresh):
    report = fresh.import_ai_dungeon(SCENARIO, answers={"Your name?": "Ila", "Your trade?": "diver"})
    camp = fresh.campaign(report.campaign_id)
    assert camp.title == "The Drowned Bell"
    assert [e.text for e in camp.history()] == ["You are Ila, a diver in Westhaven. The bell has rung for ${Days?} days."]
    assert not camp.can_undo and not camp.can_redo
    cards = camp.story_cards()
    assert cards["keys"].tolist() == [["Mara", "innkeeper"], ["bell"]]
    assert cards["entry"][0] == "Mara keeps the Crooked Lantern; she hates Ila."
    assert cards["card_type"].tolist() == ["character", "location"] and cards["notes"][0] == "met in chapter one"
    assert any("${Days?}" in w for w in report.warnings)
    carried = " ".join(report.not_carried)
    assert "sub-scenario" in carried and "scripts" in carried and "description" in carried
    with fresh.db.reading() as s:
        from engine.store import CampaignRow

        row = s.get(CampaignRow, camp.id)
        assert row.premise == "Ila is a diver. Westhaven is under quarantine." and row.authors_note == "Tone: damp dread."


def test_a_scenario_file_on_disk_imports_and_its_script_is_only_text(fresh, tmp_path):
    path = tmp_path / "drowned-bell.json"
    path.write_text(json.dumps(SCENARIO), encoding="utf-8")
    report = fresh.import_ai_dungeon(path)
    assert report.counts["story_cards"] == 2 and report.format == "AI Dungeon scenario"


def test_a_story_card_export_adds_cards_to_a_campaign(fresh, tmp_path):
    camp = fresh.new_campaign("Existing", opening="Start.")
    report = fresh.import_ai_dungeon(SCENARIO["storyCards"], campaign_id=camp.id)
    assert report.campaign_id == camp.id and len(camp.story_cards()) == 2
    assert [e.text for e in camp.history()] == ["Start."]


def test_a_story_card_export_alone_makes_a_campaign_named_after_the_file(fresh, tmp_path):
    path = tmp_path / "bell-cards.json"
    path.write_text(json.dumps(SCENARIO["storyCards"]), encoding="utf-8")
    report = fresh.import_ai_dungeon(path)
    assert fresh.campaign(report.campaign_id).title == "bell-cards"


@pytest.mark.parametrize("data", [{"hello": "world"}, [], [{"nothing": 1}], 7])
def test_what_is_not_a_scenario_is_refused_and_writes_nothing(counted, data):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused):
        wb.import_ai_dungeon(data)
    assert census() == before


# ------------------------------------------------------------------ SillyTavern
def test_world_info_becomes_story_cards(fresh):
    report = fresh.import_sillytavern(WORLD_INFO)
    camp = fresh.campaign(report.campaign_id)
    assert camp.title == "Westhaven lore"
    cards = camp.story_cards()
    assert cards["title"].tolist() == ["Mara", "The abbey crypt", "Old draft"]  # SillyTavern's order (uid)
    assert cards["keys"][1] == ["abbey", "crypt"] and cards["secondary_keys"][1] == ["north"]
    assert cards["logic"][1] == "and_any"  # no selectiveLogic: SillyTavern's default, AND ANY
    assert "Disabled in the tool it came from." in cards["notes"][2]
    assert cards["constant"].tolist() == [True, False, False] and cards["enabled"].tolist() == [True, True, False]
    carried = " ".join(report.not_carried)
    assert "`order` on 2 of 3 World Info entries" in carried and "`position` on 2 of 3" in carried
    assert "`selective`" not in carried and "`constant`" not in carried


def test_world_info_as_knowledge_is_one_markdown_source_that_retrieval_finds(fresh):
    report = fresh.import_sillytavern(WORLD_INFO, as_knowledge=True)
    camp = fresh.campaign(report.campaign_id)
    assert report.counts == {"branches": 1, "knowledge_sources": 1}
    with fresh.db.reading() as s:
        from sqlalchemy.orm import undefer

        source = s.scalars(select(KnowledgeSourceRow).options(undefer(KnowledgeSourceRow.content))
                           .where(KnowledgeSourceRow.campaign_id == camp.id)).one()
        assert source.original_filename == "Westhaven lore.md" and source.media_type == "text/markdown"
        assert source.index_state == "ready" and source.classification == "reference"
        assert "## The abbey crypt" in source.content and "Keys: abbey, crypt, north" in source.content
        assert "plague" not in source.content
    assert any("Old draft" in line for line in report.dropped)
    found = Library(fresh.db, camp.id, progress=False).retrieve("the keystone of the crypt under the north chapel",
                                                                 budget_tokens=2000)
    assert any("broken circle" in p.text for p in found.passages)


def test_world_info_can_be_added_to_an_existing_campaign_as_canon(fresh):
    camp = fresh.new_campaign("Existing", opening="Start.")
    report = fresh.import_sillytavern(WORLD_INFO, as_knowledge=True, campaign_id=camp.id,
                                      classification="canon")
    assert report.campaign_id == camp.id
    with fresh.db.reading() as s:
        assert s.scalars(select(KnowledgeSourceRow.classification)
                         .where(KnowledgeSourceRow.campaign_id == camp.id)).all() == ["canon"]


def test_a_character_book_is_read_too(fresh):
    report = fresh.import_sillytavern(CHARACTER_BOOK)
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards["title"].tolist() == ["Lantern", "Cellar"] and "Disabled" in cards["notes"][1]
    assert "`insertion_order` on 1 of 2 World Info entries" in " ".join(report.not_carried)


@pytest.mark.parametrize("data", [{"entries": "nope"}, {"name": "x"}, [1, 2],
                                  {"entries": {"0": {"content": "", "disable": True}}}])
def test_what_is_not_world_info_is_refused_and_writes_nothing(counted, data):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused):
        wb.import_sillytavern(data, as_knowledge=True)
    assert census() == before


def test_adding_to_a_missing_campaign_writes_nothing(counted):
    from engine import NotFound

    wb, census = counted
    before = census()
    with pytest.raises(NotFound):
        wb.import_sillytavern(WORLD_INFO, campaign_id=999)
    assert census() == before


def test_story_cards_are_listed_on_the_campaign(tmp_path):
    from engine import Workbench

    wb = Workbench.open(tmp_path / "cards.db")
    report = wb.import_ai_dungeon({"prompt": "You wake in ${place}.", "storyCards": [
        {"keys": "mara", "value": "Mara is the ferry-woman.", "type": "character", "title": "Mara"}]},
        answers={"place": "Westhaven"})
    cards = wb.campaign(report.campaign_id).story_cards()
    assert list(cards["title"]) == ["Mara"] and "ferry-woman" in cards.iloc[0]["entry"]


# ------------------------------------------------------------------ issue 17: nothing lost without a word
def test_an_old_world_info_entry_keeps_its_name(fresh):
    report = fresh.import_ai_dungeon({"title": "Old", "prompt": "You wake.", "worldInfo": [
        {"keys": "bell", "entry": "The bell is drowned.", "name": "The bell", "hidden": True}]})
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards["title"].tolist() == ["The bell"] and cards["entry"].tolist() == ["The bell is drowned."]
    assert "`hidden` on 1 of 1 story cards" in " ".join(report.not_carried)


def test_an_ai_dungeon_adventure_brings_its_actions_in_order(fresh):
    adventure = {"title": "Bell", "memory": "Ila is a diver.", "actions": [
        {"type": "start", "text": "The bell rings under the sea."}, {"type": "do", "text": "\n> You dive."},
        {"type": "continue", "text": " The water is black."}, {"type": "say", "text": "\n> You say \"Hello?\""},
        {"type": "continue", "text": " Something answers."}]}
    report = fresh.import_file(adventure)
    assert report.format == "AI Dungeon adventure"
    history = fresh.campaign(report.campaign_id).history()
    assert [n.text for n in history] == [a["text"] for a in adventure["actions"]]
    assert [n.kind for n in history] == ["start", "player", "narrator", "player", "narrator"]


def test_scenario_cards_as_knowledge_reach_retrieval(fresh):
    report = fresh.import_ai_dungeon(SCENARIO, answers={"Your name?": "Ila"}, as_knowledge=True)
    camp = fresh.campaign(report.campaign_id)
    assert report.counts.get("knowledge_sources") == 1 and "story_cards" not in report.counts
    found = Library(fresh.db, camp.id, progress=False).retrieve("the drowned bell in the sunken chapel",
                                                                 budget_tokens=2000)
    assert any("sunken chapel" in p.text for p in found.passages)
    assert not any("Import the cards as knowledge" in w for w in report.warnings)


def test_cards_from_an_import_are_live_lore_with_their_constant_flag(fresh):
    from engine.cards import lore_for

    report = fresh.import_sillytavern(WORLD_INFO)
    with fresh.db.reading() as s:
        fired = lore_for(s, report.campaign_id, ["We go down into the crypt under the north chapel."], "")
        unnarrowed = lore_for(s, report.campaign_id, ["We go down into the crypt."], "")
    assert [(f.title, f.found_in) for f in fired] == [("Mara", "always"), ("The abbey crypt", "story")]
    # Selective, AND ANY: the primary key alone is not enough, as in SillyTavern.
    assert [f.title for f in unnarrowed] == ["Mara"]


def test_import_file_takes_a_campaign_bundle_too(fresh, tmp_path):
    camp = fresh.new_campaign("Round", opening="The bells have not rung.")
    camp.add_story_card("Bell", keys=["bell"], entry="The bell is drowned.", constant=True)
    path = camp.export(tmp_path / "round.campaign.json").path
    report = fresh.import_file(path)
    assert report.format.startswith("story-workbench-campaign")
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards[["title", "constant", "enabled", "origin"]].values.tolist() == [["Bell", True, True, "added by hand"]]
