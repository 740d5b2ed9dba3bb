"""Keys as SillyTavern reads them: `/regex/flags`, secondary keys under the
four selective logics, and keys in a script's syntax that can never fire
(said, not silent)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from narrators import ScriptedNarrator  # noqa: E402

from engine import Workbench  # noqa: E402
from engine.cards import LOGICS, Card, CardRefused, fired_cards, key_pattern, logic_name, unusable_keys  # noqa: E402

HONEYWOOD = "Honeywood#[t=5l=5f=2S=2]"  # a key of the public Skyrim World Info (tests/data/interop)


def card(keys, secondary=(), logic="and_any", id_=1):
    return Card(id=id_, title=f"card {id_}", keys=tuple(keys), entry="text", card_type="", notes="", constant=False,
                enabled=True, origin="", created_at=None, secondary_keys=tuple(secondary), logic=logic)


def fires(c, *texts, pending=""):
    return bool(fired_cards([c], list(texts), pending))


# ------------------------------------------------------------------ /regex/flags
@pytest.mark.parametrize("key, text, hit", [
    ("/drag(on|ons)/i", "DRAGONS arrive", True),          # i: case-insensitive
    ("/drag(on|ons)/", "DRAGONS arrive", False),          # no i: as written
    ("/drag(on|ons)/gi", "the dragons", True),            # g changes nothing for a yes/no test
    ("/^the bell/m", "rain.\nthe bell rings", True),      # m: ^ at each line
    ("/^the bell/", "rain.\nthe bell rings", False),
    ("/bell.rings/s", "bell\nrings", True),               # s: . takes a newline
    ("/bell/y", "bell tolls", True),                      # y: sticky, anchored where a test starts
    ("/bell/y", "the bell tolls", False),
    ("/a\\/b/", "see a/b here", True),                    # an escaped slash is a slash
    ("/a/b/", "see /a/b/ here", True),                    # an unescaped slash: plain text, as SillyTavern reads it
    ("/a/b/", "see ab here", False),
    ("/(?<name>Mara)\\k<name>/", "MaraMara", True),      # JavaScript's named groups
    ("/[unclosed/", "see /[unclosed/ here", True),        # not an expression: taken literally
    ("/mara/x", "/mara/x", True),                         # x is no JavaScript flag: plain text
])
def test_regex_keys_read_as_sillytavern_reads_them(key, text, hit):
    pattern = key_pattern(key)
    assert pattern is not None and bool(pattern.search(text)) is hit


def test_a_regex_key_fires_a_card_through_the_index():
    assert fires(card(["/shadow ?fangs?/i"]), "A SHADOWFANG howls.")
    assert not fires(card(["/shadow ?fangs?/"]), "A SHADOWFANG howls.")


# ------------------------------------------------------------------ selective logic
# The rule of SillyTavern's world-info.js (matchSecondaryKeys) for world_info_logic (primary "magic", secondary
# "fire" and "ice"): which scans fire under which logic.
@pytest.mark.parametrize("logic, text, hit", [
    ("and_any", "magic fire", True), ("and_any", "magic wind", False),
    ("and_all", "magic fire", False), ("and_all", "magic fire ice", True),
    ("not_any", "magic wind", True), ("not_any", "magic fire", False),
    ("not_all", "magic fire", True), ("not_all", "magic fire ice", False),
])
def test_secondary_keys_fire_as_in_sillytavern(logic, text, hit):
    assert fires(card(["magic"], ["fire", "ice"], logic), text) is hit
    assert not fires(card(["magic"], ["fire", "ice"], logic), text.replace("magic", "mundane"))  # primary first


def test_secondary_keys_are_looked_for_in_every_scanned_text():
    """SillyTavern scans the messages joined: the primary key in the input and
    the secondary one in the story still fire the card."""
    c = card(["Mara"], ["lantern"], "and_all")
    assert fires(c, "The lantern gutters.", pending="I ask Mara")
    assert not fires(c, "The rain falls.", pending="I ask Mara")


def test_selective_logic_numbers_are_sillytaverns():
    assert [logic_name(n) for n in range(4)] == ["and_any", "not_all", "not_any", "and_all"] == list(LOGICS)
    assert logic_name("AND ALL") == "and_all" and logic_name("not-any") == "not_any"
    assert logic_name(4) == logic_name(True) == logic_name(None) == logic_name("sometimes") == ""


# ------------------------------------------------------------------ unusable keys
def test_a_key_in_a_scripts_syntax_never_fires_and_is_named():
    assert key_pattern(HONEYWOOD) is None
    assert not fires(card([HONEYWOOD]), f"We reach Honeywood. {HONEYWOOD}")
    assert unusable_keys(["Honeywood", HONEYWOOD, "/honey/i"]) == [HONEYWOOD]
    assert fires(card([HONEYWOOD, "Honeywood"]), "We reach Honeywood.")  # its other keys still work
    assert unusable_keys(["{{user}}", "{{getvar::town}}", "{user}"]) == ["{{user}}", "{{getvar::town}}"]


def test_a_secondary_key_that_can_never_fire_counts_as_not_found():
    assert not fires(card(["magic"], [HONEYWOOD], "and_any"), "magic Honeywood")
    assert fires(card(["magic"], [HONEYWOOD], "not_any"), "magic Honeywood")


# ------------------------------------------------------------------ stored, edited, carried
@pytest.fixture
def wb(tmp_path):
    wb = Workbench.open(tmp_path / "keys.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["The rain keeps falling."]))
    yield wb
    wb.close()


def test_secondary_keys_and_logic_are_stored_edited_and_shown(wb):
    camp = wb.new_campaign("Westhaven")
    card_id = camp.add_story_card("Crypt", keys=["crypt"], entry="The crypt is flooded.", secondary_keys=["north"],
                                  logic="not_any")
    camp.add_story_card("Honeywood", keys=[HONEYWOOD], entry="A meadery.")
    frame = camp.story_cards()
    assert frame["secondary_keys"].tolist() == [["north"], []] and frame["logic"].tolist() == ["not_any", "and_any"]
    assert frame["unusable_keys"].tolist() == [[], [HONEYWOOD]]
    edited = camp.edit_story_card(card_id, logic="and_all", secondary_keys="north, chapel")
    assert edited.logic == "and_all" and edited.secondary_keys == ("north", "chapel")
    with pytest.raises(CardRefused, match="logic must be one of and_any, not_all, not_any, and_all"):
        camp.edit_story_card(card_id, logic="sometimes")


def test_the_native_bundle_carries_secondary_keys_and_logic_both_ways(wb, tmp_path):
    camp = wb.new_campaign("Westhaven")
    camp.add_story_card("Crypt", keys=["crypt"], entry="The crypt is flooded.", secondary_keys=["north", "chapel"],
                        logic="not_all")
    exported = camp.export(tmp_path / "westhaven.json")
    import json

    (written,) = json.loads(exported.path.read_text())["story_cards"]
    assert written["secondary_keys"] == ["north", "chapel"] and written["logic"] == "not_all"
    back = wb.campaign(wb.import_campaign(exported.path).campaign_id).story_cards()
    assert back["secondary_keys"].tolist() == [["north", "chapel"]] and back["logic"].tolist() == ["not_all"]
    written["logic"] = "maybe"
    report = wb.import_campaign(json.loads(json.dumps({**json.loads(exported.path.read_text()),
                                                       "story_cards": [written]})))
    assert any("logic was not one of" in r for r in report.repaired)
    assert wb.campaign(report.campaign_id).story_cards()["logic"].tolist() == ["and_any"]
