"""Speed targets of campaign bundles, recorded with pytest-benchmark.

A 300-turn campaign (with its prompts, states and records, which are most of
the bytes) exports in < 2 s and imports in < 2 s. `make test` runs each once
(--benchmark-disable) and still checks the target with its own clock.
"""
import time

import pytest
from narrators import ScriptedNarrator

from engine import Workbench

pytestmark = pytest.mark.benchmark
TURNS = 300
TARGET_SECONDS = 2.0
BARE = {"memory_enabled": False, "auto_summarize": False, "embedder": "none"}
REPLY = ('The lantern gutters, and somewhere below water drips on stone.\n\n```state\n{"events": ['
         '{"type": "create_entity", "entity": "lantern", "entity_type": "item", "name": "Lantern"}]}\n```')


@pytest.fixture(scope="module")
def long_campaign(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle-bench")
    wb = Workbench.open(folder / "long.db", background=False)
    wb.configure(narrator=ScriptedNarrator([REPLY]), **BARE)
    camp = wb.new_campaign("Long", premise="A very long descent.", opening="The stair goes down.")
    for i in range(TURNS):
        camp.act(f"I go down another flight, step {i}")
        if i % 50 == 49:
            camp.retry()
            camp.save_point(f"flight {i}")
    yield wb, camp, folder
    wb.close()


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def test_export_a_300_turn_campaign(benchmark, long_campaign):
    wb, camp, folder = long_campaign
    report, seconds = timed(lambda: benchmark.pedantic(
        lambda: camp.export(folder / "long.campaign.json"), rounds=3, iterations=1))
    assert report.importable and report.counts["nodes"] >= 2 * TURNS + 1
    assert seconds / (3 if benchmark.enabled else 1) < TARGET_SECONDS


def test_import_a_300_turn_campaign(benchmark, long_campaign, tmp_path):
    wb, camp, folder = long_campaign
    path = camp.export(folder / "long.campaign.json").path
    target = Workbench.open(tmp_path / "target.db", background=False)
    target.configure(**BARE)
    report, seconds = timed(lambda: benchmark.pedantic(lambda: target.import_campaign(path),
                                                       rounds=3, iterations=1))
    assert report.counts["nodes"] >= 2 * TURNS + 1 and report.repaired == [] and report.dropped == []
    assert [e.text for e in target.campaign(report.campaign_id).history()] == [e.text for e in camp.history()]
    assert seconds / (3 if benchmark.enabled else 1) < TARGET_SECONDS
    target.close()
