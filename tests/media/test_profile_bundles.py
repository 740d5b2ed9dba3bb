"""Profiles travel: this workbench's bundle carries them both ways, the
reference system's bundle brings them in, and older files and databases
open with none (issue 31 item 2; the reference's §13 checks)."""
from __future__ import annotations

import copy
import json
import sqlite3
import sys
from pathlib import Path

import pytest
from narrators import BagOfWordsEmbedder
from office import ALICE, OFFICE, build

from engine import Workbench
from engine.bundle import FORMAT, VERSION, validate
from engine.bundle.facade import export_campaign
from engine.store import LATEST, Database, media_tables, migrations

sys.path.insert(0, str(Path(__file__).parents[1] / "bundle"))
from reference_files import aged, v3  # noqa: E402

FIELDS = ("entity_key", "descriptors", "features", "style_notes")


def exported(camp, path: Path) -> dict:
    export_campaign(camp._db, camp.id, path, machine_text=())
    return json.loads(path.read_text(encoding="utf-8"))


def carried(payload: dict) -> list[dict]:
    return [{k: row[k] for k in FIELDS} for row in payload["visual_profiles"]]


@pytest.fixture
def elsewhere(tmp_path):
    wb = Workbench.open(tmp_path / "elsewhere.db", background=False)
    wb.configure(embedder=BagOfWordsEmbedder())
    yield wb
    wb.close()


def test_the_bundle_carries_only_profiled_entities_in_the_same_format(office, tmp_path):
    payload = exported(office, tmp_path / "office.json")
    assert (payload["format"], payload["version"]) == (FORMAT, VERSION)  # no version bump
    assert carried(payload) == [{"entity_key": "alice", **ALICE}, {"entity_key": "office", **OFFICE}]
    assert all(row["created_at"] and row["updated_at"] for row in payload["visual_profiles"])


def test_a_copy_in_another_file_has_the_same_profiles_and_its_own_edits(office, tmp_path, elsewhere):
    report = elsewhere.import_campaign(exported(office, tmp_path / "office.json"))
    assert report.counts["visual_profiles"] == 2
    copy_ = elsewhere.campaign(report.campaign_id)
    assert copy_.visual_profiles() == office.visual_profiles()
    packet = copy_.scene()
    assert packet["characters"][1]["visual_profile"]["descriptors"]["build"] == "tall"
    assert packet["characters"][2]["visual_profile"] is None
    assert packet["location"]["visual_profile"]["descriptors"]["lighting"] == "flat fluorescent"
    assert packet["action_summary"] == office.scene()["action_summary"]
    copy_.set_visual_profile("alice", {"hair": "bleached"})
    assert office.visual_profile("alice")["descriptors"]["hair"] == "short black"


def test_export_import_export_is_a_fixed_point_for_profiles(office, tmp_path, elsewhere):
    first = exported(office, tmp_path / "one.json")
    copy_ = elsewhere.campaign(elsewhere.import_campaign(first).campaign_id)
    second = exported(copy_, tmp_path / "two.json")
    assert second["visual_profiles"] == first["visual_profiles"]  # times included


def test_a_neighbours_profiles_are_never_exported(office, wb, tmp_path):
    neighbour = build(wb, profiles=False)
    neighbour.set_visual_profile("roger", {"role": "intruder"})
    assert "intruder" not in json.dumps(exported(office, tmp_path / "office.json"))
    assert carried(exported(neighbour, tmp_path / "n.json")) == [
        {"entity_key": "roger", "descriptors": {"role": "intruder"}, "features": [], "style_notes": ""}]


def test_a_file_without_profiles_imports_with_none_and_a_working_packet(office, tmp_path, elsewhere):
    payload = exported(office, tmp_path / "office.json")
    del payload["visual_profiles"]
    copy_ = elsewhere.campaign(elsewhere.import_campaign(payload).campaign_id)
    assert copy_.visual_profiles() == {}
    assert [c["visual_profile"] for c in copy_.scene()["characters"]] == [None, None, None]


def test_malformed_profiles_are_dropped_with_a_note_and_the_rest_arrive(office, tmp_path, elsewhere):
    payload = exported(office, tmp_path / "office.json")
    payload["visual_profiles"] += [
        {"entity_key": "", "descriptors": "not an object"}, {"descriptors": {"a": "b"}}, "a string",
        {"entity_key": "bill", "descriptors": {"hair": "x" * 401}},
        {"entity_key": "alice", "descriptors": {"hair": "a second alice"}},
    ]
    report = elsewhere.import_campaign(payload)
    copy_ = elsewhere.campaign(report.campaign_id)
    assert copy_.visual_profiles() == {"alice": ALICE, "office": OFFICE}
    assert any("visual profile" in line and "(4 times)" in line for line in report.dropped)
    assert any("same entity" in line for line in report.dropped)


def test_a_profiles_section_that_is_not_a_list_costs_only_itself(office, tmp_path, elsewhere):
    payload = exported(office, tmp_path / "office.json")
    payload["visual_profiles"] = {"alice": ALICE}
    report = elsewhere.import_campaign(payload)
    assert elsewhere.campaign(report.campaign_id).visual_profiles() == {}
    assert any("visual profiles section was not a list" in line for line in report.dropped)


def test_the_plan_is_pure_and_normalised(office, tmp_path, wb):
    payload = exported(office, tmp_path / "office.json")
    payload["visual_profiles"][0]["entity_key"] = "  alice  "
    before = copy.deepcopy(payload)
    plan = validate(payload)
    assert [p.entity_key for p in plan.visual_profiles] == ["alice", "office"]
    assert payload == before and len(wb.campaigns()) == 1


def test_the_reference_systems_profiles_are_carried_not_lost(elsewhere):
    payload = v3()
    payload["visualProfiles"] += [{"entityKey": "", "descriptors": "not an object"},
                                  {"entity_key": "lamp", "descriptors": {"glow": "amber"}, "features": ["dented"],
                                   "style_notes": "etching"}]
    report = elsewhere.import_campaign(payload)
    camp = elsewhere.campaign(report.campaign_id)
    assert camp.visual_profiles() == {
        "ila": {"descriptors": {"hair": "black"}, "features": [], "style_notes": ""},
        "lamp": {"descriptors": {"glow": "amber"}, "features": ["dented"], "style_notes": "etching"}}
    assert not any("visual profiles" in line for line in report.not_carried)
    assert any("visual profile" in line for line in report.dropped)


@pytest.mark.parametrize("era", ["pre-m9", "pre-m5"])
def test_older_reference_files_without_profiles_have_none(elsewhere, era):
    payload = aged(era)
    payload.pop("visualProfiles", None)
    camp = elsewhere.campaign(elsewhere.import_campaign(payload).campaign_id)
    assert camp.visual_profiles() == {} and camp.scene()["characters"] == []


# ------------------------------------------------------------------ the schema
def _at_version(path: Path, version: int) -> None:
    """A file as a workbench of schema `version` left it."""
    raw = sqlite3.connect(path, isolation_level=None)
    for step in migrations.MIGRATIONS[:version]:
        raw.execute("BEGIN")
        step(raw)
        raw.execute("COMMIT")
    raw.execute(f"PRAGMA user_version = {version}")
    raw.execute("INSERT INTO campaigns (title, created_at, updated_at) VALUES ('An older campaign', "
                "'2026-01-01', '2026-01-01')")
    raw.close()


def _schema(path: Path) -> tuple:
    raw = sqlite3.connect(path)
    try:
        table = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'visual_profiles'").fetchone()
        indexes = sorted(raw.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").fetchall())
        return raw.execute("PRAGMA user_version").fetchone()[0], table, indexes
    finally:
        raw.close()


def test_an_older_database_gains_the_table_and_matches_a_fresh_one(tmp_path):
    """One migration step, appended: fresh and upgraded files are the same
    schema, the old rows are intact and a second opening changes nothing."""
    step = [getattr(m, "run", m) for m in migrations.MIGRATIONS].index(media_tables.migrate)
    older = tmp_path / "older.db"
    _at_version(older, step)
    Database(older).close()
    fresh = tmp_path / "fresh.db"
    Database(fresh).close()
    assert _schema(older) == _schema(fresh) and _schema(older)[0] == LATEST
    Database(older).close()
    assert _schema(older)[0] == LATEST
    raw = sqlite3.connect(older)
    assert raw.execute("SELECT title FROM campaigns").fetchall() == [("An older campaign",)]
    assert raw.execute("SELECT count(*) FROM visual_profiles").fetchone() == (0,)
    assert raw.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_backup_holds_the_profiles(office, wb):
    backup = wb.backup()
    raw = sqlite3.connect(f"file:{backup.path}?mode=ro", uri=True)
    rows = dict(raw.execute("SELECT entity_key, descriptors FROM visual_profiles").fetchall())
    assert json.loads(rows["alice"]) == ALICE["descriptors"] and set(rows) == {"alice", "office"}
