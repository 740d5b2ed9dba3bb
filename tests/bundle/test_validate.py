"""`validate` is pure: it needs no database, changes nothing it is given,
and says the same thing every time (the writer only copies its Plan)."""
import copy
import json

from reference_files import FLAT, v3

from engine.bundle import validate
from engine.bundle.plan import Notes


def test_validate_changes_nothing_it_is_given(rich):
    payload = json.loads(rich[2].read_text(encoding="utf-8"))
    payload["campaign"]["state"] = {"entities": "wrong"}
    payload["nodes"][2]["state_after"] = "broken"
    for node in payload["nodes"]:
        node["live"] = False
    for given in (payload, v3(), copy.deepcopy(FLAT)):
        before = copy.deepcopy(given)
        validate(given)
        assert given == before


def test_validate_gives_the_same_plan_twice(rich):
    payload = json.loads(rich[2].read_text(encoding="utf-8"))
    first, second = validate(payload), validate(payload)
    assert first.counts() == second.counts() and first.head == second.head
    assert [(n.key, n.live, n.parent) for n in first.nodes] == [(n.key, n.live, n.parent) for n in second.nodes]


def test_the_same_repair_is_one_line_with_a_count():
    notes = Notes()
    for _ in range(3):
        notes.repair("a node's live flag was not true or false")
    notes.drop("a save point was dropped")
    assert notes.repaired == ["a node's live flag was not true or false (3 times)"]
    assert notes.dropped == ["a save point was dropped"]


def test_an_empty_campaign_round_trips_at_depth_minus_one(fresh, tmp_path):
    camp = fresh.new_campaign("Nothing yet")
    report = fresh.import_campaign(camp.export(tmp_path / "empty.json").path)
    again = fresh.campaign(report.campaign_id)
    assert again.head[1] == -1 and again.history() == [] and not again.can_undo and not again.can_redo
    again.act("begin")  # the imported root branch takes the story on
    assert len(again.history()) == 2
