"""A bundle's protected fields past their bounds: cut, named in the report
with their size, and the campaign plays its first turn at the default window.

Both formats: this workbench's own (an export of a rich played campaign) and
the reference app's v3 file. A value within its bound passes untouched, so an
export of a campaign at its bounds imports back with nothing repaired.
"""
from __future__ import annotations

import copy
import json

import pytest
from reference_files import v3

from engine import ContextOverflow
from engine.budget import standing, tokens

HUGE = "Salt crusts every rope in the harbour and the gulls have gone quiet. " * 4500  # 310,500 characters
RARE = "".join(chr(0x20000 + i % 4000) for i in range(20_000))  # ~3.9 tokens a character
RULES = [f"Rule {i}: the harbour master's word is law on the quay." for i in range(2000)]


@pytest.fixture(scope="module")
def good(rich):
    return json.loads(rich[2].read_text(encoding="utf-8"))


def plays(wb, report) -> None:
    camp = wb.campaign(report.campaign_id)
    assert wb.settings.context_budget == standing.DEFAULT_WINDOW
    try:
        camp.context("I look around.")
    except ContextOverflow as exc:
        pytest.fail(f"imported but cannot play: {exc}")
    assert camp.act("I look around.").text


def named(report, words: str) -> str:
    line = next((r for r in report.repaired if r.startswith(words)), None)
    assert line is not None and "past its bound of" in line, report.repaired
    return line


@pytest.mark.parametrize("field, words", [("premise", "the premise: 310,500 characters"),
                                          ("ai_instructions", "the AI instructions: 310,500 characters"),
                                          ("authors_note", "the author's note: 310,500 characters"),
                                          ("protagonist", "the protagonist: 310,500 characters")])
def test_a_native_bundle_field_past_its_bound_is_cut_named_and_plays(counted, good, field, words):
    wb, _ = counted
    bad = copy.deepcopy(good)
    bad["campaign"][field] = HUGE
    report = wb.import_campaign(bad)
    assert "cut to its first" in named(report, words)
    kept = getattr(wb.campaign(report.campaign_id), field, None)
    if field == "authors_note":
        assert HUGE.startswith(kept) and tokens.count(kept) <= standing.BOUNDS[field].tokens
    plays(wb, report)


def test_a_native_bundle_canon_past_its_bound_keeps_its_first_rules(counted, good):
    wb, _ = counted
    bad = copy.deepcopy(good)
    bad["campaign"]["canon"]["rules"] = RULES
    report = wb.import_campaign(bad)
    line = named(report, "the campaign canon: 2,000 rules")
    exported = wb.campaign(report.campaign_id).export(counted[0].db.path.parent / "canon.json")
    rules = json.loads(exported.path.read_text(encoding="utf-8"))["campaign"]["canon"]["rules"]
    assert rules == RULES[: len(rules)] and 0 < len(rules) < 50 and f"the first {len(rules)} kept" in line
    plays(wb, report)


def test_a_native_bundle_card_past_its_bound_is_cut(counted, good):
    wb, _ = counted
    bad = copy.deepcopy(good)
    bad["story_cards"][0]["entry"] = HUGE
    report = wb.import_campaign(bad)
    assert "cut to its first" in named(report, f"the text of story card “{bad['story_cards'][0]['title']}”")
    plays(wb, report)


@pytest.mark.parametrize("field, words", [("memory", "the premise"), ("authorsNote", "the author's note"),
                                          ("aiInstructions", "the AI instructions"),
                                          ("personaName", "the protagonist")])
def test_a_reference_file_field_past_its_bound_is_cut_named_and_plays(counted, field, words):
    wb, _ = counted
    data = v3()
    data[field] = HUGE
    report = wb.import_campaign(data)
    named(report, f"{words}: 310,500 characters")
    plays(wb, report)


@pytest.mark.parametrize("rules", [RARE, 7])
def test_canon_rules_that_are_not_a_list_are_repaired_and_play(counted, rules):
    """Found by the volume fuzzer: rules given as one string were shown a
    character a line (140,085 protected tokens)."""
    wb, _ = counted
    data = v3()
    data["campaignCanon"] = {"rules": rules}
    report = wb.import_campaign(data)
    assert any("rules were not a list" in r for r in report.repaired), report.repaired
    plays(wb, report)


def test_a_reference_file_canon_past_its_bound_is_cut(counted):
    wb, _ = counted
    data = v3()
    data["campaignCanon"] = {"rules": [HUGE]}
    report = wb.import_campaign(data)
    assert "(cut short)" in named(report, "the campaign canon: 1 rules")
    plays(wb, report)


def test_a_campaign_at_its_bounds_exports_and_imports_back_unchanged(counted, tmp_path):
    wb, _ = counted
    fill = {f: standing.cut(f, HUGE)[0] for f in ("premise", "ai_instructions", "authors_note", "protagonist")}
    camp = wb.new_campaign("At the bounds", opening="The quay is empty.", **fill)
    exported = camp.export(tmp_path / "bounds.json")
    assert exported.importable and exported.warning == ""
    report = wb.import_campaign(exported.path)
    assert not [r for r in report.repaired if "past its bound" in r]
    assert wb.campaign(report.campaign_id).authors_note == fill["authors_note"]


# ------------------------------------------------------------------ the narrative state


def test_a_state_past_its_bound_is_shortened_keeping_its_keys_and_plays(counted, good):
    """A fuzzed bundle's state held 20,000 characters of rare CJK and needed
    159,640 protected tokens on its first turn."""
    wb, _ = counted
    bad = copy.deepcopy(good)
    huge = {"entities": {"ila": {"type": "character", "name": "Ila", "description": RARE},
                         "mara": {"type": "character", "name": "Mara", "description": HUGE}},
            "possessions": {"silver-key": "mara"}, "scene": {"summary": HUGE, "present": ["ila", "mara"]}}
    bad["campaign"]["state"] = huge
    for node in bad["nodes"]:
        node["state_after"] = huge
    report = wb.import_campaign(bad)
    line = named(report, "the campaign's state was past its bound of 600 tokens (")
    assert "its texts were shortened to" in line
    assert any(r.startswith("a node's state snapshot was past its bound") and "times)" in r for r in report.repaired)
    camp = wb.campaign(report.campaign_id)
    assert camp.state["possessions"] == {"silver-key": "mara"} and set(camp.state["entities"]) == {"ila", "mara"}
    plays(wb, report)
    shown = camp.context("I look around.").section("narrative_state")
    assert shown is not None and shown.tokens <= standing.BOUNDS["state"].tokens


@pytest.mark.parametrize("change", [
    lambda s: s["possessions"].update({"silver-key": ["mara"]}),
    lambda s: s["scene"].update({"location": {"at": "the quay"}}),
    lambda s: s["scene"].update({"present": 7}),
    lambda s: s["facts"].append({"id": "fact-9", "subject": ["ila"], "predicate": "owes", "object": {"x": 1}}),
    lambda s: s["relationships"].append({"source": [1], "target": "mara", "label": "owes"}),
    lambda s: s["entities"].update({"quay": {"type": "place", "name": "Quay", "location": [2]}}),
    lambda s: s["entities"]["mara"].update({"name": ["Mara"]}),
], ids=["owner", "location", "present", "fact", "relationship", "entity location", "entity name"])
def test_a_state_naming_an_entity_by_something_not_a_key_is_repaired_and_plays(counted, good, change):
    """Found by the volume fuzzer: a possession held by a list imported
    cleanly, then every turn failed with a raw TypeError."""
    wb, _ = counted
    bad = copy.deepcopy(good)
    state = {"entities": {"ila": {"type": "character", "name": "Ila"}, "mara": {"type": "character", "name": "Mara"}},
             "possessions": {"silver-key": "ila"}, "facts": [], "relationships": [], "threads": {},
             "scene": {"summary": "At the quay.", "present": ["ila"]}}
    change(state)
    for node in bad["nodes"]:
        node["state_after"] = state
    report = wb.import_campaign(bad)
    assert any("that is not text; it was cleared" in r for r in report.repaired), report.repaired
    plays(wb, report)
