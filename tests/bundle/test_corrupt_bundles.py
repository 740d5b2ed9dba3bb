"""Every bad input a bundle can bring: refused (and nothing written), repaired,
or dropped, each as the corrupt-bundle table says (CB-01..12).

Each case mutates a real export of a rich campaign. "Nothing written" is
checked by counting the rows of every table in the file, not by trusting
that an exception was raised.
"""
import copy
import json

import pytest
from sqlalchemy import select

from engine.bundle import FORMAT, READABLE, BundleRefused, limits
from engine.knowledge import intake
from engine.store import NodeRow
from engine.store.knowledge_tables import KnowledgeSourceRow


@pytest.fixture(scope="module")
def good(rich):
    return json.loads(rich[2].read_text(encoding="utf-8"))


@pytest.fixture
def bad(good):
    return copy.deepcopy(good)


def refused(counted, payload, *words) -> str:
    wb, count = counted
    before = count()
    with pytest.raises(BundleRefused) as caught:
        wb.import_campaign(payload)
    assert count() == before, "a refused import wrote rows"
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)
    return message


def accepted(counted, payload):
    wb, _ = counted
    report = wb.import_campaign(payload)
    return report, wb.campaign(report.campaign_id)


def narrations(payload):
    return [n for n in payload["nodes"] if n["kind"] == "narrator"]


# ------------------------------------------------------------------ format
@pytest.mark.parametrize("payload,words", [([], "not a campaign bundle"), (7, "not a campaign bundle"),
                                           ("a string", "no file at")])
def test_a_payload_that_is_not_an_object_is_refused(counted, payload, words):
    refused(counted, payload, words)


def test_an_empty_object_is_refused_naming_the_format(counted):
    refused(counted, {}, "format")


@pytest.mark.parametrize("value", ["missing", 3, None, [FORMAT], {"v": 3}])
def test_a_missing_or_non_text_format_is_refused(counted, bad, value):
    if value == "missing":
        del bad["format"]
    else:
        bad["format"] = value
    refused(counted, bad, "format")


def test_an_unknown_format_is_refused_by_name_with_the_readable_ones(counted, bad):
    bad["format"] = "ai-dnd-adventure-v42"
    message = refused(counted, bad, "ai-dnd-adventure-v42", FORMAT)
    assert all(name in message for name in READABLE)


@pytest.mark.parametrize("version", [42, "1", None, 1.0, True])
def test_an_unknown_version_is_refused_naming_the_version_found(counted, bad, version):
    bad["version"] = version
    message = refused(counted, bad, repr(version))
    if version == 42:
        assert "newer workbench" in message


# ------------------------------------------------------------------ tree
def test_a_node_on_an_unlisted_branch_is_refused(counted, bad):
    bad["nodes"][-1]["branch"] = 99
    refused(counted, bad, "99")


def test_a_branch_forking_from_a_later_branch_is_refused(counted, bad):
    bad["branches"][0]["parent"] = bad["branches"][1]["id"]
    refused(counted, bad, "root")


def test_a_branch_forking_from_itself_is_refused(counted, bad):
    bad["branches"][1]["parent"] = bad["branches"][1]["id"]
    refused(counted, bad, "itself")


def test_a_branch_forking_from_a_branch_listed_after_it_is_refused(counted, bad):
    bad["branches"][1]["parent"] = bad["branches"][-1]["id"]
    refused(counted, bad, "listed before")


def test_a_branch_without_a_fork_depth_is_refused(counted, bad):
    del bad["branches"][1]["fork_depth"]
    refused(counted, bad, "depth")


@pytest.mark.parametrize("depth", [None, -4, "2", 2.5])
def test_a_node_without_a_whole_depth_is_refused(counted, bad, depth):
    bad["nodes"][2]["depth"] = depth
    refused(counted, bad, "depth")


def test_a_head_past_the_story_is_refused(counted, bad):
    bad["head"]["depth"] = 10000
    refused(counted, bad, "ends at")


@pytest.mark.parametrize("depth", ["3", 3.5, True, [3]])
def test_a_head_depth_of_the_wrong_type_is_refused(counted, bad, depth):
    bad["head"]["depth"] = depth
    refused(counted, bad, "whole number")


def test_an_unknown_head_branch_falls_back_to_the_root_tip(counted, bad):
    bad["head"] = {"branch": 77}
    report, camp = accepted(counted, bad)
    assert any("root" in line for line in report.repaired)
    history = camp.history()
    assert history[-1].kind == "narrator" and not camp.can_redo
    assert history[0].text == "Ila sits in the Crooked Lantern with Mara."


def test_two_nodes_with_one_id_are_refused(counted, bad):
    bad["nodes"][3]["id"] = bad["nodes"][2]["id"]
    refused(counted, bad, "both call themselves")


def test_two_nodes_at_one_place_are_refused(counted, bad):
    twin = copy.deepcopy(bad["nodes"][2])
    twin["id"] = 10_000
    bad["nodes"].append(twin)
    refused(counted, bad, "holds one node")


def test_a_hole_in_the_story_is_refused(counted, bad):
    bad["nodes"] = [n for n in bad["nodes"] if not (n["branch"] == 1 and n["depth"] == 1)]
    for node in bad["nodes"]:
        if node["parent"] == 2:
            node["parent"] = None
    refused(counted, bad, "hole")


def test_a_node_where_its_branch_only_borrows_is_refused(counted, bad):
    forked = next(b for b in bad["branches"] if b["fork_depth"] >= 1)
    node = next(n for n in bad["nodes"] if n["branch"] == forked["id"])
    node["depth"] = forked["fork_depth"]
    refused(counted, bad, "owns only deeper")


def test_an_unknown_node_kind_is_refused(counted, bad):
    bad["nodes"][1]["kind"] = "ai"
    refused(counted, bad, "'ai'")


def test_a_head_on_an_input_is_refused(counted, bad):
    player = next(n for n in bad["nodes"] if n["kind"] == "player" and n["branch"] == 1)
    bad["head"] = {"branch": 1, "depth": player["depth"]}
    refused(counted, bad, "player")


def test_takes_with_none_live_get_exactly_one_live_each(counted, bad):
    for node in bad["nodes"]:
        node["live"] = False
    report, camp = accepted(counted, bad)
    assert any("live" in line for line in report.repaired)
    wb, _ = counted
    with wb.db.reading() as s:
        rows = s.execute(select(NodeRow.depth, NodeRow.parent_id, NodeRow.live)
                         .where(NodeRow.campaign_id == camp.id)).all()
    groups = {}
    for depth, parent, live in rows:
        groups.setdefault((depth, parent), []).append(live)
    assert all(sum(lives) == 1 for lives in groups.values())


def test_parents_that_name_no_node_are_dropped(counted, bad):
    for node in bad["nodes"]:
        node["parent"] = 999999
    report, camp = accepted(counted, bad)
    assert any("parent" in line for line in report.dropped)
    assert len(camp.history()) == 5


def test_a_node_that_is_its_own_parent_is_cleared(counted, bad):
    for node in bad["nodes"]:
        node["parent"] = node["id"]
    report, camp = accepted(counted, bad)
    wb, _ = counted
    with wb.db.reading() as s:
        assert not s.scalars(select(NodeRow).where(NodeRow.parent_id == NodeRow.id)).all()
    assert camp.turn(camp.history()[-1].id).text


@pytest.mark.parametrize("cap,value", [("MAX_NODES", 3), ("MAX_BRANCHES", 1)])
def test_node_and_branch_caps_are_enforced(counted, good, monkeypatch, cap, value):
    monkeypatch.setattr(limits, cap, value)
    refused(counted, good, "limit")


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(counted, rich, monkeypatch):
    monkeypatch.setattr(limits, "MAX_BUNDLE_BYTES", 1024)
    refused(counted, rich[2], "too large")


def test_a_file_that_is_not_json_is_refused(counted, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "story-workbench-campaign", "version": 1,', encoding="utf-8")
    refused(counted, path, "not valid JSON", "line 1")


def test_nan_is_refused(counted, tmp_path):
    path = tmp_path / "nan.json"
    path.write_text('{"format": "story-workbench-campaign", "version": NaN}', encoding="utf-8")
    refused(counted, path, "NaN")


# ------------------------------------------------------------------ save points
def test_a_save_point_past_the_story_is_dropped_not_moved(counted, bad):
    bad["save_points"][0]["depth"] = 5000
    report, camp = accepted(counted, bad)
    assert [p.name for p in camp.save_points()] == ["Back at the tavern"]
    assert any("never moved" in line for line in report.dropped)


@pytest.mark.parametrize("change", [{"branch": 44}, {"name": "   "}, {"name": None}])
def test_a_save_point_on_an_unlisted_branch_or_without_a_name_is_dropped(counted, bad, change):
    bad["save_points"][0].update(change)
    _, camp = accepted(counted, bad)
    assert len(camp.save_points()) == len(bad["save_points"]) - 1


def test_a_malformed_save_point_section_costs_only_the_save_points(counted, bad, good):
    bad["save_points"] = {"nope": 1}
    report, camp = accepted(counted, bad)
    assert camp.save_points() == [] and len(camp.history()) == 5
    assert report.counts["nodes"] == len(good["nodes"])


# ------------------------------------------------------------------ state and audit
@pytest.mark.parametrize("section", [{"a": 1}, "events"])
def test_a_state_event_section_that_is_not_a_list_is_refused(counted, bad, section):
    bad["state_events"] = section
    refused(counted, bad, "list")


def test_a_state_event_that_is_not_an_object_is_refused(counted, bad):
    bad["state_events"][0] = "set_possession"
    refused(counted, bad, "not an object")


def test_an_applied_event_without_a_type_is_refused(counted, bad):
    applied = next(e for e in bad["state_events"] if e["accepted"])
    applied["event"]["type"] = ""
    refused(counted, bad, "type")


def test_an_event_naming_a_missing_turn_is_refused_with_its_id(counted, bad):
    bad["state_events"][0]["node"] = 424242
    refused(counted, bad, "424242")


def test_a_malformed_campaign_state_is_emptied_section_by_section(counted, bad, good):
    bad["campaign"]["state"] = {"entities": "wrong", "possessions": {"silver-key": "mara"}}
    report, camp = accepted(counted, bad)
    assert camp.state["entities"] == {} and camp.state["possessions"] == {"silver-key": "mara"}
    assert report.counts["nodes"] == len(good["nodes"])


def test_a_malformed_snapshot_becomes_the_empty_state_never_a_later_one(counted, bad):
    first = next(n for n in narrations(bad) if n["depth"] == 2)
    first["state_after"] = "not a document"
    report, camp = accepted(counted, bad)
    camp.undo()
    assert camp.history()[-1].depth == 2 and camp.state == {}
    assert any("state snapshot" in line for line in report.repaired)


# ------------------------------------------------------------------ knowledge
def test_a_knowledge_section_that_is_not_a_list_is_refused(counted, bad):
    bad["knowledge"] = {"canon.md": "text"}
    refused(counted, bad, "list")


def test_a_knowledge_source_without_content_is_refused(counted, bad):
    bad["knowledge"][0]["content"] = ""
    refused(counted, bad, "content")


def test_an_unknown_classification_is_refused(counted, bad):
    bad["knowledge"][0]["classification"] = "gospel"
    refused(counted, bad, "classification")


def test_a_knowledge_source_that_is_a_string_is_refused(counted, bad):
    bad["knowledge"][0] = "canon.md"
    refused(counted, bad, "not an object")


def test_an_unknown_visibility_becomes_normal(counted, bad):
    bad["knowledge"][1]["visibility"] = "invisible"
    _, camp = accepted(counted, bad)
    wb, _ = counted
    with wb.db.reading() as s:
        assert set(s.scalars(select(KnowledgeSourceRow.visibility)
                             .where(KnowledgeSourceRow.campaign_id == camp.id))) == {"normal"}


def test_a_wrong_content_hash_is_recomputed_and_noted(counted, bad, good):
    bad["knowledge"][0]["content_hash"] = "0" * 64
    report, camp = accepted(counted, bad)
    wb, _ = counted
    with wb.db.reading() as s:
        row = s.scalars(select(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == camp.id)
                        .order_by(KnowledgeSourceRow.id)).first()
        assert row.content_hash == good["knowledge"][0]["content_hash"] and "did not match" in row.notes


def test_the_source_limit_is_enforced(counted, good, monkeypatch):
    monkeypatch.setattr(intake, "MAX_SOURCES_PER_CAMPAIGN", 2)
    refused(counted, good, "limit")


def test_the_source_size_limit_is_enforced(counted, good, monkeypatch):
    monkeypatch.setattr(intake, "MAX_SOURCE_BYTES", 32)
    refused(counted, good, "at most")


def test_control_characters_in_knowledge_are_refused(counted, bad):
    bad["knowledge"][0]["content"] = "binary\x00data"
    refused(counted, bad, "control character")


# ------------------------------------------------------------------ stored prompts
def test_a_malformed_prompt_report_drops_the_record_and_keeps_the_turn(counted, bad):
    for node in narrations(bad):
        if node["record"]:
            node["record"]["report"] = "a prompt"
    report, camp = accepted(counted, bad)
    turn = camp.turn(camp.history()[2].id)  # a narration that had a record
    assert turn.text == "Mara hands you the silver key." and dict(turn.report) == {} and turn.narrator == ""
    assert any("record" in line for line in report.dropped)


def test_a_record_on_an_input_is_dropped(counted, bad):
    player = next(n for n in bad["nodes"] if n["kind"] == "player")
    player["record"] = copy.deepcopy(narrations(bad)[0]["record"])
    report, _ = accepted(counted, bad)
    assert any("not a narration" in line for line in report.dropped)


# ------------------------------------------------------------------ summaries
def test_a_summary_without_a_place_is_dropped(counted, bad):
    bad["summaries"][0]["depth"] = None
    report, camp = accepted(counted, bad)
    assert camp.summaries().empty and any("summary" in line for line in report.dropped)


def test_a_malformed_summary_section_costs_only_the_summaries(counted, bad):
    bad["summaries"] = "a summary"
    _, camp = accepted(counted, bad)
    assert camp.summaries().empty and len(camp.history()) == 5


# ------------------------------------------------------------------ inert data
@pytest.mark.parametrize("name", ["../../../etc/passwd.md", "/etc/shadow.txt", "C:\\Windows\\hosts.md",
                                  "....//....//etc/passwd.md"])
def test_file_names_lose_their_path_parts(counted, bad, name):
    bad["knowledge"][0]["original_filename"] = name
    _, camp = accepted(counted, bad)
    wb, _ = counted
    with wb.db.reading() as s:
        names = list(s.scalars(select(KnowledgeSourceRow.original_filename)
                               .where(KnowledgeSourceRow.campaign_id == camp.id)))
    assert all("/" not in n and "\\" not in n and ".." not in n for n in names)


def test_titles_and_urls_stay_text(counted, bad):
    bad["campaign"]["title"] = "; rm -rf / #"
    bad["knowledge"][0]["content"] += "\nSee https://example.invalid/x and file:///etc/passwd ![map](http://x/y.png)\n"
    _, camp = accepted(counted, bad)
    assert camp.title == "; rm -rf / #"


def test_a_very_long_title_is_shortened_not_refused(counted, bad):
    bad["campaign"]["title"] = "T" * 5000
    report, camp = accepted(counted, bad)
    assert len(camp.title) == 200 and any("shortened" in line for line in report.repaired)
