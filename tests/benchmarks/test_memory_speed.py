"""Memory recall over a 1,000-memory bank: < 5 ms beside the query embedding."""
import numpy as np
import pytest
from narrators import ScriptedNarrator

from engine import Workbench
from engine.memory import recall
from engine.memory.vectors import pack
from engine.store.memory_tables import MemoryRow
from engine.story import StoryTree

pytestmark = pytest.mark.benchmark


class Precomputed:
    """The query embedding is timed elsewhere: this returns a fixed vector at once."""

    model_id = "bench-384"

    def __init__(self, vector):
        self.vector = vector

    def embed(self, texts):
        return np.stack([self.vector] * len(texts))


def test_recall_over_1000_memories(benchmark, tmp_path):
    rng = np.random.default_rng(3)
    wb = Workbench.open(tmp_path / "bank.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["On."]), embedder="none", memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("Bank", opening="Start.")
    camp.act("walk")
    with wb.db.writing() as s:
        branch, depth = camp.head
        for i in range(1000):
            s.add(MemoryRow(campaign_id=camp.id, text=f"Memory {i} about the road.", branch_id=branch, depth=depth,
                            source_start=depth, source_end=depth, vector=pack(rng.normal(size=384)),
                            vector_model="bench-384", pinned=i < 2))
    embedder = Precomputed(rng.normal(size=384).astype(np.float32))

    def once():
        with wb.db.reading() as s:
            from engine.store import CampaignRow

            path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
            return recall(s, camp.id, path, embedder, 5, "I walk on")

    once()  # the vector cache is warm from the second turn on
    result = benchmark(once)
    assert len(result.used) == 5 and result.report["considered"] == 1000
