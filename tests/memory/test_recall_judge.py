"""A judge (a stronger relevance model) re-scores the first score's best
memories: it orders them among themselves, never lifts one it did not see,
and a judge that fails leaves the first order."""
import importlib
from dataclasses import replace

import numpy as np
import pytest
from helpers import add_memories, memory_bank

from engine.search import DEFAULT
from engine.store import CampaignRow
from engine.story import StoryTree

recall_package = importlib.import_module("engine.memory.recall")
MODEL = "fixed-4"
LINE = "I look for the lost key."
# First-stage cosines against the line: A 0.9, B 0.6, C 0.3, D 0.1; no two
# alike enough to be taken for the same memory (the tuning's memory_redundant).
VECTORS = {"A": [0.9, 0.436, 0, 0], "B": [0.6, 0, 0.8, 0], "C": [0.3, 0, 0, 0.954], "D": [0.1, -0.995, 0, 0]}


class Fixed:
    """Embeds the line as the x axis and every other text as zeros, so the
    story's parts score 0 and the line's cosines are VECTORS' first column."""

    model_id = MODEL

    def embed(self, texts):
        return np.stack([np.array([1, 0, 0, 0] if t == LINE else [0, 0, 0, 0], dtype=np.float32)
                         for t in texts])


class Judge:
    """Scores each memory by a table and keeps what it was asked."""

    def __init__(self, table, fail=False):
        self.table, self.fail, self.asked = table, fail, []

    def __call__(self, parts, texts):
        self.asked.append((list(parts), list(texts)))
        if self.fail:
            raise RuntimeError("the second model is not loaded")
        return [self.table[t] for t in texts]


@pytest.fixture
def bank(tmp_path):
    wb, camp = memory_bank(tmp_path / "judge.db")
    add_memories(wb.db, camp, list(VECTORS.items()), MODEL)
    return wb, camp


def recalled(wb, camp, top_k=3, judge=None, judged=DEFAULT.judged):
    with wb.db.reading() as s:
        path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
        return recall_package.recall(s, camp.id, path, Fixed(), top_k, LINE, [], judge=judge,
                                     tuning=replace(DEFAULT, judged=judged))


def test_without_a_judge_the_first_score_orders(bank):
    assert [m["text"] for m in recalled(*bank).used] == ["A", "B", "C"]


def test_the_judge_orders_the_best_it_was_shown(bank):
    judge = Judge({"A": 0.1, "B": 0.2, "C": 0.7})
    found = recalled(*bank, top_k=2, judge=judge, judged=3)
    assert [m["text"] for m in found.used] == ["C", "B"]
    assert judge.asked == [([LINE], ["A", "B", "C"])]  # the first score's best three, the line as the query
    assert all(m["judged"] for m in found.used)


def test_a_memory_the_judge_did_not_see_stays_below_those_it_did(bank):
    judge = Judge({"A": 0.0, "B": 0.0})  # it thinks nothing of either; C and D were never shown to it
    found = recalled(*bank, top_k=3, judge=judge, judged=2)
    assert [m["text"] for m in found.used] == ["A", "B", "C"]
    assert [m["judged"] for m in found.used] == [True, True, False]


def test_a_judge_that_fails_leaves_the_first_order(bank):
    judge = Judge({}, fail=True)
    found = recalled(*bank, judge=judge)
    assert [m["text"] for m in found.used] == ["A", "B", "C"] and not any(m["judged"] for m in found.used)
    assert judge.asked and found.report["error"] is None
