"""Memory recall over every played line stays within a turn's budget.

Target: recall (memories, 4,000 played lines and the summaries of a
2,000-turn campaign, scored together) <= 50 ms median per turn under
`make bench`. The embedder is made instant (bag of words), so what is timed
is the engine's recall; each round asks with a new line, as a turn does.
"""
from __future__ import annotations

import statistics
import time

import pytest
from long_campaign import grow
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench, memory
from engine.memory.lines import embed_story
from engine.store import CampaignRow
from engine.story import StoryTree

pytestmark = pytest.mark.benchmark
TARGET_MS = 50


@pytest.mark.parametrize("turns", [2000])
def test_recall_over_every_line(benchmark, tmp_path, turns):
    embedder = BagOfWordsEmbedder(384)
    wb = Workbench.open(tmp_path / "lines.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["The bells ring."]), embedder=embedder)
    camp = wb.new_campaign("Westhaven", premise="A port town.", protagonist="Aldric", opening="The bells are silent.")
    grow(wb.db, camp.id, turns, embedder)
    while embed_story(wb.db, camp.id, embedder, limit=4096):
        pass
    times, rounds = [], iter(range(10_000))

    def recall():
        n = next(rounds)
        with wb.db.reading() as s:
            path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
            started = time.perf_counter()
            found = memory.recall(s, camp.id, path, embedder, 5, f"I ask about the harbour ledger, time {n}.")
            times.append(time.perf_counter() - started)
        return found

    found = benchmark.pedantic(recall, rounds=20 if benchmark.enabled else 3, iterations=1, warmup_rounds=1)
    assert found.report["units"]["line"] >= 2 * turns and any(u["unit"] == "line" for u in found.used)
    median = statistics.median(times) * 1000
    benchmark.extra_info.update(turns=turns, lines=found.report["units"]["line"], median_ms=round(median, 2))
    if benchmark.enabled:
        assert median <= TARGET_MS, f"recall took {median:.1f} ms at {turns} turns (target {TARGET_MS})"
    wb.close()
