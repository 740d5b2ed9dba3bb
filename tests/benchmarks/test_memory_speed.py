"""Memory recall over a 1,000-memory bank: < 5 ms beside the query embedding."""
import numpy as np
import pytest
from helpers import add_memories, memory_bank

from engine.memory import recall
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
    wb, camp = memory_bank(tmp_path / "bank.db")
    add_memories(wb.db, camp, [(f"Memory {i} about the road.", rng.normal(size=384)) for i in range(1000)],
                 "bench-384", pinned=2)
    embedder = Precomputed(rng.normal(size=384).astype(np.float32))

    def once():
        with wb.db.reading() as s:
            from engine.store import CampaignRow

            path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
            return recall(s, camp.id, path, embedder, 5, "I walk on")

    once()  # the vector cache is warm from the second turn on
    result = benchmark(once)
    assert len(result.used) == 5 and result.report["considered"] == 1000
