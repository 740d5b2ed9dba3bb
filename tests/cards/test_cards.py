"""Story cards from Python, and which of them fire for a turn."""
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).parents[1]))

from narrators import ScriptedNarrator  # noqa: E402

from engine import NotFound, Workbench  # noqa: E402
from engine.cards import Card, CardRefused, fired_cards, key_pattern, lore_for  # noqa: E402
from engine.store.cards_tables import StoryCardRow  # noqa: E402


@pytest.fixture
def camp(tmp_path):
    wb = Workbench.open(tmp_path / "cards.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["The rain keeps falling on the harbour.",
                                            "The innkeeper, Mara, pours a drink without asking.",
                                            "Gulls cry over the empty quay."]))
    yield wb.new_campaign("Westhaven", protagonist="Ila", opening="The bells have not rung for three days.")
    wb.close()


def card(id_, keys, entry="text", constant=False, enabled=True):
    return Card(id=id_, title=f"card {id_}", keys=tuple(keys), entry=entry, card_type="", notes="",
                constant=constant, enabled=enabled, origin="", created_at=None)


# ------------------------------------------------------------------ matching
@pytest.mark.parametrize("key, text, hit", [
    ("Mara", "mara pours a drink", True),           # case-insensitive
    ("Mara", "Mara's inn is full", True),           # a word boundary before the apostrophe
    ("Mara", "the Amaranth fields", False),         # never inside another word
    ("Mara", "Maras", False),                       # whole words: a plural is another word
    ("magical forest", "a Magical  forest", False),  # a phrase matches as written
    ("magical forest", "the magical forest glows", True),
    ("City-17", "back to city-17.", True),
    ("/shadow ?fangs?/i", "A SHADOWFANG howls", True),  # NovelAI-style regular expression
    ("/shadow ?fangs?/", "A SHADOWFANG howls", False),
    ("/[unclosed/", "see /[unclosed/ here", True),     # an invalid expression is taken literally
])
def test_keys_match_case_insensitively_as_whole_words(key, text, hit):
    assert bool(key_pattern(key).search(text)) is hit


def test_constant_input_and_story_order_and_disabled_cards():
    cards = [card(1, ["bell"]), card(2, [], constant=True), card(3, ["Mara"]), card(4, ["Mara"], enabled=False),
             card(5, ["quay"]), card(6, ["harbour"], entry="   ")]
    story = ["The harbour is grey.", "A bell rings at the quay.", "Rain."]
    fired = fired_cards(cards, story, pending="I ask Mara about it")
    assert [(f.card_id, f.found_in, f.key, f.distance) for f in fired] == [
        (2, "always", "", 0), (3, "input", "Mara", 0), (1, "story", "bell", 1), (5, "story", "quay", 1)]


def test_only_the_last_scan_depth_texts_are_read():
    from engine.cards import SCAN_DEPTH

    story = ["The bell was cast in the old days."] + ["Nothing happens."] * SCAN_DEPTH
    assert fired_cards([card(1, ["bell"])], story) == []
    assert [f.card_id for f in fired_cards([card(1, ["bell"])], story[:SCAN_DEPTH])] == [1]


# ------------------------------------------------------------------ the API
def test_cards_are_added_edited_and_deleted_from_python(camp):
    card_id = camp.add_story_card("Mara", keys="Mara, innkeeper", entry="Mara keeps the Crooked Lantern.",
                                  card_type="character")
    frame = camp.story_cards()
    assert frame["keys"].tolist() == [["Mara", "innkeeper"]] and frame["origin"].tolist() == ["added by hand"]
    edited = camp.edit_story_card(card_id, constant=True, entry="Mara keeps the inn and a secret.")
    assert edited.constant and edited.entry == "Mara keeps the inn and a secret." and edited.keys == ("Mara", "innkeeper")
    camp.delete_story_card(card_id)
    assert camp.story_cards().empty


@pytest.mark.parametrize("call", [
    lambda c: c.add_story_card("", entry=""),
    lambda c: c.add_story_card("x", keys=[1, 2]),
    lambda c: c.add_story_card("x" * 201),
    lambda c: c.add_story_card("x", constant="yes"),
])
def test_bad_cards_are_refused_and_write_nothing(camp, call):
    with pytest.raises(CardRefused, match="Nothing was written"):
        call(camp)
    assert camp.story_cards().empty


def test_editing_refuses_unknown_fields_and_other_campaigns_cards(camp):
    card_id = camp.add_story_card("Mara", keys=["Mara"], entry="The innkeeper.")
    with pytest.raises(CardRefused, match="no field colour"):
        camp.edit_story_card(card_id, colour="red")
    with pytest.raises(CardRefused, match="neither"):
        camp.edit_story_card(card_id, title="", entry="")
    other = camp.workbench.new_campaign("Elsewhere")
    with pytest.raises(NotFound):
        other.edit_story_card(card_id, title="Stolen")
    assert camp.story_cards()["title"].tolist() == ["Mara"]


# ------------------------------------------------------------------ played turns
def test_turns_that_mention_and_do_not_mention_a_key(camp):
    """A card fires on the turn whose input names it, stays while the story
    mentions it, and drops once the mention leaves the scanned window."""
    camp.add_story_card("Mara", keys=["Mara", "innkeeper"], entry="Mara buried her brother in secret.")
    camp.add_story_card("Quarantine", keys=[], entry="Nobody may leave Westhaven.", constant=True)
    db = camp.workbench.db

    def fired(pending=""):
        texts = [n.text for n in camp.history()]
        with db.reading() as s:
            return [(f.title, f.found_in) for f in lore_for(s, camp.id, texts, pending)]

    assert fired("I walk to the harbour.") == [("Quarantine", "always")]
    camp.act("I walk to the harbour.")                                  # no mention in the story yet
    assert fired("I look for the innkeeper.") == [("Quarantine", "always"), ("Mara", "input")]
    camp.act("I look for the innkeeper.")                              # the narration names Mara
    assert fired() == [("Quarantine", "always"), ("Mara", "story")]
    camp.act("I wait.")
    camp.act("I wait some more.")                                       # four nodes since the mention
    assert fired() == [("Quarantine", "always")]


def test_a_fired_card_is_a_knowledge_candidate_with_provenance(camp):
    from engine.search.results import Retrieved

    camp.add_story_card("Mara", keys=["Mara"], entry="Mara buried her brother in secret.")
    with camp.workbench.db.reading() as s:
        (fired,) = lore_for(s, camp.id, ["Mara waits."], "")
        row = s.scalars(select(StoryCardRow)).one()
    candidate = fired.to_retrieved()
    assert isinstance(candidate, Retrieved) and candidate.passage_id == -row.id
    assert candidate.classification == "canon" and candidate.text == row.entry and candidate.tokens > 0
    assert candidate.matched_terms == ("Mara",) and not candidate.always
    assert fired.record() | {"tokens": 0} == {"card_id": row.id, "title": "Mara", "card_type": "", "origin":
                                              "added by hand", "found_in": "story", "key": "Mara", "distance": 0,
                                              "tokens": 0}


def test_phrases_punctuation_and_expressions_fire_through_the_index():
    cards = [card(1, ["magical forest"]), card(2, ["City-17"]), card(3, ["/shadow ?fangs?/i"]), card(4, ["Mara"]),
             card(5, ["?!"]), card(6, ["old  road"])]
    story = ["They cross the Magical Forest toward city-17.", "A shadowfang howls ?! Amaranth blooms.",
             "The old road is empty."]
    fired = {f.card_id: f.key for f in fired_cards(cards, story)}
    assert fired == {1: "magical forest", 2: "City-17", 3: "/shadow ?fangs?/i", 5: "?!"}


def test_the_reported_key_is_the_cards_first_that_matched():
    (fired,) = fired_cards([card(1, ["innkeeper", "Mara"])], ["Mara, the innkeeper, waves."])
    assert fired.key == "innkeeper"
