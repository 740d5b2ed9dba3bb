"""The reference app's bundles (ai-dnd-adventure v3, v2, v1 and every older
era) import as far as our model allows, invent nothing, and say what could
not be carried (LB-01..06, TK-01)."""
import copy

import pytest
from reference_files import ERAS, FLAT, aged, v3
from sqlalchemy import func, select

from engine.bundle import BundleRefused
from engine.store import NodeRow, SavePointRow
from engine.store.knowledge_tables import KnowledgeSourceRow
from engine.store.memory_tables import MemoryRow, SummaryRow
from engine.store.narrative_tables import StateEventRow


def count(wb, model, campaign_id):
    with wb.db.reading() as s:
        return s.scalar(select(func.count()).select_from(model).where(model.campaign_id == campaign_id))


def test_a_current_reference_bundle_arrives_as_far_as_the_model_allows(fresh):
    report = fresh.import_campaign(v3())
    camp = fresh.campaign(report.campaign_id)
    assert report.format == "ai-dnd-adventure-v3"
    assert [e.text for e in camp.history()] == ["It begins.", "> You go north.", "One.", '> You say "Hello?"', "Two."]
    assert [e.kind for e in camp.history()] == ["start", "player", "narrator", "player", "narrator"]
    assert camp.can_redo and camp.can_undo and report.can_redo
    assert camp.state["possessions"] == {"lamp": "ila"}
    camp.undo()
    assert "possessions" not in camp.state  # the snapshot of the node the head lands on
    camp.redo()
    assert [(t.text, t.take, t.takes) for t in camp.takes(camp.history()[2].id)] == [("One.", 1, 2), ("One again.", 2, 2)]
    assert len(camp.takes()) == 2  # "Two." and the abandoned line's "Two, differently."
    events = camp.events()
    assert list(events["source"]) == ["narrator", "correction"]
    assert events.iloc[1]["event"] == {"type": "set_possession", "item": "lamp", "owner": "ila"}
    assert [p.name for p in camp.save_points()] == ["At the mouth"]
    assert camp.summaries()["text"].tolist() == ["Ila went north."]
    assert count(fresh, MemoryRow, camp.id) == 1 and count(fresh, KnowledgeSourceRow, camp.id) == 1
    assert camp.story_cards()["keys"].tolist() == [["cave", "sea"]]
    turn = camp.turn(camp.history()[2].id)
    assert turn.report["prompt"]["system"] == "Narrate the cave." and turn.accounting == {"status": "fits"}
    assert turn.report["knowledge"]["used"][0]["source_id"] is None  # -1 named no possible source
    retried = camp.turn(camp.takes(camp.history()[2].id)[1].id)
    assert retried.report["prompt"]["system"] == "Narrate the cave, again."  # unpacked from contextSnapshotZ
    carried = " ".join(report.not_carried)
    for lost in ("scripting state", "state proposals", "stateChanges", "persona's description", "before/after"):
        assert lost in carried, lost
    assert "visual profiles" not in carried  # carried since issue 31 (tests/media/test_profile_bundles.py)


@pytest.mark.parametrize("era", ERAS)
def test_every_era_keeps_the_whole_tree_and_invents_nothing(fresh, era):
    report = fresh.import_campaign(aged(era))
    camp = fresh.campaign(report.campaign_id)
    assert report.counts["nodes"] == len(v3()["actions"])
    assert count(fresh, StateEventRow, camp.id) == 0 and count(fresh, SummaryRow, camp.id) == 0
    if era != "pre-m9":
        assert count(fresh, KnowledgeSourceRow, camp.id) == 0
    if era not in ("pre-m9", "pre-m7"):
        assert camp.state == {}
        with fresh.db.reading() as s:
            assert all(n.state_after == {} for n in s.scalars(select(NodeRow).where(NodeRow.campaign_id == camp.id)))
    if era in ("pre-save-points", "pre-active-head"):
        assert count(fresh, SavePointRow, camp.id) == 0
    assert [t.takes for t in camp.takes(camp.history()[2].id)] == [2, 2]  # parentage read from the tree


def test_a_v2_file_keeps_its_head(fresh):
    camp = fresh.campaign(fresh.import_campaign(aged("pre-m9")).campaign_id)
    assert camp.head[1] == 4 and camp.can_redo


def test_a_file_without_a_head_opens_at_its_tip(fresh):
    camp = fresh.campaign(fresh.import_campaign(aged("pre-active-head")).campaign_id)
    assert camp.head[1] == 6 > 4
    assert camp.can_undo and not camp.can_redo


def test_a_legacy_campaign_can_gain_state_knowledge_and_save_points(fresh):
    from narrators import ScriptedNarrator

    from engine.knowledge import Library

    camp = fresh.campaign(fresh.import_campaign(aged("pre-active-head")).campaign_id)
    fresh.configure(narrator=ScriptedNarrator(['The tide turns.\n\n```state\n{"events": [{"type": "create_entity", '
                                               '"entity": "tide", "entity_type": "thing", "name": "Tide"}]}\n```']))
    camp.act("wait for the tide")
    assert "tide" in camp.state["entities"]
    camp.save_point("After the tide")
    Library(fresh.db, camp.id, progress=False).add("canon.md", "# Canon\n\nThe tide rules the cave.\n",
                                                    classification="canon")
    assert len(camp.save_points()) == 1 and count(fresh, KnowledgeSourceRow, camp.id) == 1


def test_a_legacy_import_reexports_in_this_format_and_round_trips(fresh, tmp_path):
    camp = fresh.campaign(fresh.import_campaign(aged("pre-m9")).campaign_id)
    exported = camp.export(tmp_path / "again.json")
    import json

    payload = json.loads(exported.path.read_text(encoding="utf-8"))
    assert payload["format"] == "story-workbench-campaign"
    assert payload["state_events"] == [] and payload["summaries"] == []
    again = fresh.import_campaign(exported.path)
    assert again.counts["nodes"] == len(v3()["actions"]) and again.repaired == [] and again.dropped == []


def test_a_flat_v1_file_turns_variants_into_takes(fresh):
    report = fresh.import_campaign(copy.deepcopy(FLAT))
    camp = fresh.campaign(report.campaign_id)
    assert [e.text for e in camp.history()] == ["It begins.", "look around", "Take two."]
    takes = camp.takes()
    assert [(t.text, t.take, t.takes) for t in takes] == [("Take one.", 1, 2), ("Take two.", 2, 2)]
    with fresh.db.reading() as s:
        lives = s.scalars(select(NodeRow.live).where(NodeRow.campaign_id == camp.id, NodeRow.depth == 2)).all()
    assert sorted(lives) == [False, True]
    with fresh.db.reading() as s:
        from engine.store import CampaignRow

        assert s.get(CampaignRow, camp.id).premise == "A flat story."
    assert any("scripts" in line for line in report.not_carried)
    assert not camp.can_redo and camp.can_undo


def test_a_reference_file_with_a_broken_tree_is_refused_like_our_own(counted):
    bad = v3()
    bad["actions"][2]["branch"] = 99
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="99"):
        wb.import_campaign(bad)
    assert census() == before


@pytest.mark.parametrize("section", ["stateProposals", "stateEvents"])
def test_a_malformed_reference_audit_section_is_refused(counted, section):
    bad = v3()
    bad[section] = "not a list"
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="list"):
        wb.import_campaign(bad)
    assert census() == before


def test_a_proposal_naming_a_missing_action_is_refused(counted):
    bad = v3()
    bad["stateProposals"][0]["action"] = 424242
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="424242"):
        wb.import_campaign(bad)
    assert census() == before


def test_an_event_with_an_empty_type_is_refused(counted):
    bad = v3()
    bad["stateEvents"][0]["eventType"] = ""
    wb, census = counted
    with pytest.raises(BundleRefused, match="type"):
        wb.import_campaign(bad)
