"""Migration v7 on a file written by the release before it (300 turns, made
with tests/store/make_release_file.py at commit e5c6a8b)."""
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine import Workbench

RELEASE_FILE = Path(__file__).parent / "data" / "release_v5_300_turns.db.gz"


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "release.db"
    with gzip.open(RELEASE_FILE) as src, path.open("wb") as out:
        shutil.copyfileobj(src, out)
    return path


def _reports(path) -> dict[int, dict]:
    raw = sqlite3.connect(path)
    try:
        return {n: json.loads(r) for n, r in raw.execute("SELECT node_id, report FROM turn_records")}
    finally:
        raw.close()


def test_old_records_move_to_v3_and_give_back_the_same_prompt(old_file):
    before = _reports(old_file)
    assert len(before) > 250 and all("version" not in r for r in before.values())
    wb = Workbench.open(old_file, background=False)
    camp = wb.campaigns()[0]
    after = _reports(old_file)
    converted = [n for n, r in after.items() if r.get("version") == 3]
    assert len(converted) == len(before)  # every record of this release converts
    for node_id, old in before.items():
        report = camp.turn(node_id).report
        assert report["prompt"] == old["prompt"], node_id
        assert report["tokens"] == old["tokens"] and report["history"] == old["history"]
        assert report["knowledge"] == old["knowledge"] and report["narrative"] == old["narrative"]
        assert "exact prompt" in report._repr_html_()
    stored_before = sum(len(json.dumps(r)) for r in before.values())
    stored_after = sum(len(json.dumps(r)) for r in after.values())
    assert stored_after < stored_before / 5
    assert len(camp.records()) > 200
    wb.close()


def test_a_record_that_would_not_rebuild_is_kept_as_it_was(old_file):
    raw = sqlite3.connect(old_file)
    node_id, report = raw.execute("SELECT node_id, report FROM turn_records ORDER BY node_id DESC LIMIT 1").fetchone()
    report = json.loads(report)
    report["prompt"]["story"] += " (a prompt the sections do not add up to)"
    raw.execute("UPDATE turn_records SET report = ? WHERE node_id = ?", (json.dumps(report), node_id))
    raw.commit()
    raw.close()
    wb = Workbench.open(old_file, background=False)
    assert "version" not in _reports(old_file)[node_id]
    assert wb.campaigns()[0].turn(node_id).report["prompt"] == report["prompt"]
    wb.close()


def test_the_memory_reads_of_a_turn_use_the_indexes_of_migration_9(tmp_path):
    """Query plans, not timings: each per-turn memory read goes through an index
    that bounds it by the active bank or the coordinate, never a scan."""
    from engine.store import Database

    Database(tmp_path / "plans.db").close()
    raw = sqlite3.connect(tmp_path / "plans.db")
    plans = {
        "ix_memories_active": "SELECT id FROM memories WHERE campaign_id = 1 AND forgotten IS 0 AND vector_model != 'm'",
        "ix_memories_active_coordinate": "SELECT id, pinned FROM memories WHERE branch_id = 1 AND depth BETWEEN 0 "
                                         "AND 99 AND forgotten IS 0",
        "ix_memories_coordinate": "SELECT source_end FROM memories WHERE branch_id = 1 AND depth BETWEEN 0 AND 99 "
                                  "ORDER BY depth DESC LIMIT 1",
        "ix_summaries_coordinate": "SELECT id FROM summaries WHERE branch_id = 1 AND depth BETWEEN 0 AND 99 "
                                   "ORDER BY depth DESC LIMIT 1",
    }
    for index, sql in plans.items():
        plan = " ".join(row[-1] for row in raw.execute("EXPLAIN QUERY PLAN " + sql))
        assert f"INDEX {index} " in plan and "SCAN" not in plan, (index, plan)
    raw.close()
