"""Building the context for the next turn: < 20 ms at turn 1,001 with counts
cached, and flat from 100 to 10,000 turns (only the newest nodes are read)."""
import sqlite3
from datetime import datetime

import pytest
from narrators import ScriptedNarrator

from engine import Workbench

pytestmark = pytest.mark.benchmark
PARA = ("Rain drums on the cistern lid while the lamplighter counts the steps aloud, and somewhere below "
        "the old pumps cough into life for the first time in a decade. ")


def bulk_campaign(path, turns):
    """Writes a long story straight into the file: the benchmark is the read, not the writes."""
    wb = Workbench.open(path)
    camp = wb.new_campaign("Long", premise="A flooded city.", opening="The stair goes down.")
    wb.close()
    raw = sqlite3.connect(path)
    branch = raw.execute("SELECT head_branch_id FROM campaigns WHERE id=?", (camp.id,)).fetchone()[0]
    parent = raw.execute("SELECT id FROM nodes WHERE campaign_id=?", (camp.id,)).fetchone()[0]
    now = datetime(2026, 1, 1).isoformat(" ")
    for depth in range(1, 2 * turns + 1):
        kind, text = ("player", f"> You go down flight {depth}.") if depth % 2 else ("narrator", f"[{depth}] " + PARA * 3)
        cur = raw.execute(
            "INSERT INTO nodes (campaign_id, branch_id, depth, parent_id, kind, text, raw_text, live, edited, state_after, created_at)"
            " VALUES (?,?,?,?,?,?,?,1,0,'{}',?)", (camp.id, branch, depth, parent, kind, text, text, now))
        parent = cur.lastrowid
    raw.execute("UPDATE campaigns SET head_depth=? WHERE id=?", (2 * turns, camp.id))
    raw.commit()
    raw.close()
    return camp.id


@pytest.mark.parametrize("turns", [100, 1000, 10000])
def test_context_for_the_next_turn(benchmark, tmp_path, turns):
    path = tmp_path / f"ctx{turns}.db"
    campaign_id = bulk_campaign(path, turns)
    wb = Workbench.open(path)
    wb.configure(narrator=ScriptedNarrator(window=8192), embedder="none")
    camp = wb.campaign(campaign_id)
    camp.context("I listen")  # warm the token cache, as any turn after the first finds it
    report = benchmark(lambda: camp.context("I listen"))
    assert report["history"]["total"] == 2 * turns + 1  # the opening and every node; the input is pending
    assert report["tokens"]["total"] <= report["tokens"]["budget"]
    wb.close()
