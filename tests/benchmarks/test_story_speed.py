"""Speed targets of the foundation, recorded with pytest-benchmark.

`make test` runs each once (--benchmark-disable) to prove they work;
`make bench` times them and writes evidence/benchmarks.json. Targets:
a 1,000-turn campaign opens in < 0.2 s; a turn's engine overhead
(everything but generation) is < 30 ms; a fork adds O(1) rows.
"""
import pytest
from helpers import census
from narrators import ScriptedNarrator

from engine import Workbench

pytestmark = pytest.mark.benchmark
TURNS = 1000
# The foundation's own cost: derived work (memories, summaries, embeddings)
# and the state protocol are measured by their own benchmarks.
BARE = {"memory_enabled": False, "auto_summarize": False, "embedder": "none", "state_protocol": False}


class Instant(ScriptedNarrator):
    """Generation that costs nothing, so what is timed is the engine."""


@pytest.fixture(scope="module")
def long_campaign(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "long.db"
    wb = Workbench.open(path, background=False)
    wb.configure(narrator=Instant(["The lantern gutters, and somewhere below water drips on stone."]), **BARE)
    camp = wb.new_campaign("Long", premise="A very long descent.", opening="The stair goes down.")
    for i in range(TURNS):
        camp.act(f"I go down another flight, step {i}")
    wb.close()
    return path, camp.id


def test_open_a_1000_turn_campaign(benchmark, long_campaign):
    path, campaign_id = long_campaign

    def open_and_read():
        wb = Workbench.open(path)
        history = wb.campaign(campaign_id).history()
        wb.close()
        return history

    history = benchmark(open_and_read)
    assert len(history) == 2 * TURNS + 1


def test_turn_engine_overhead_at_1000_turns(benchmark, long_campaign):
    path, campaign_id = long_campaign
    wb = Workbench.open(path)
    wb.configure(narrator=Instant(["A door."]), **BARE)
    camp = wb.campaign(campaign_id)
    camp.act("warm the token cache")
    turn = benchmark.pedantic(lambda: camp.act("I listen"), rounds=30, iterations=1)
    assert turn.text == "A door."
    wb.close()


def test_a_fork_adds_constant_rows(tmp_path):
    """Forking at turn 5 and at turn 300 writes the same number of rows."""
    wb = Workbench.open(tmp_path / "fork.db", background=False)
    wb.configure(narrator=Instant(["Echo."]), **BARE)
    added = []
    for turns in (5, 300):
        camp = wb.new_campaign(f"F{turns}", opening="Start.")
        for _ in range(turns):
            camp.act("walk")
        camp.undo()
        before = census(wb)
        camp.act("run instead")
        after = census(wb)
        added.append({t: after[t] - before[t] for t in after})
    assert added[0] == added[1] == {
        "campaigns": 0, "branches": 1, "nodes": 2, "turn_records": 1, "save_points": 0, "settings": 0,
    }
