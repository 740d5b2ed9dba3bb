"""Memory vectors in the shared cache: keyed per open database, invalidated by
their one writer, and read (and stacked) only when the bank changes."""
import gc
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import add_memories, memory_bank
from sqlalchemy import event, select

from engine.memory import recall
from engine.memory.bank import set_vector
from engine.store import CampaignRow, Database
from engine.store.memory_tables import MemoryRow
from engine.story import StoryTree

MODEL = "fixed-4"
NORTH, SOUTH, EAST = np.eye(4, dtype=np.float32)[:3]


class Fixed:
    """Embeds its own line (which names its vector) as one given vector, and
    any other text as zeros: one model id, one vector per text, as the
    query-vector cache recall embeds through (`engine.vectors.QUERIES`) takes
    an embedder to be. The story's parts then score 0 and the line decides."""

    model_id = MODEL

    def __init__(self, vector):
        self.vector = np.asarray(vector, dtype=np.float32)
        self.line = f"I walk on {self.vector.tobytes().hex()}"

    def embed(self, texts):
        return np.stack([self.vector if t == self.line else np.zeros_like(self.vector) for t in texts])


def add_memory(db: Database, camp, text: str, vector) -> int:
    return add_memories(db, camp, [(text, vector)], MODEL)[0]


def scores(db: Database, camp, query) -> dict[str, float]:
    """{memory text: similarity} of what recall carries for `query`."""
    with db.reading() as s:
        path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
        embedder = Fixed(query)
        found = recall(s, camp.id, path, embedder, 5, embedder.line)
    return {m["text"]: m["similarity"] for m in found.used}


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def blob_reads(db: Database) -> list[int]:
    """How many memory vectors each statement reading them asks for."""
    reads: list[int] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if re.search(r"memories\.vector\b", statement) and " IN " in statement:
            reads.append(len(parameters))

    for engine in db.engines:
        event.listen(engine, "before_cursor_execute", count)
    return reads


@pytest.mark.parametrize("old_still_open", [True, False])
def test_a_file_made_again_at_the_same_path_never_serves_the_old_files_vectors(tmp_path, old_still_open):
    path = tmp_path / "bank.db"
    old, camp = memory_bank(path)
    first = add_memory(old.db, camp, "The old north road.", NORTH)
    assert scores(old.db, camp, NORTH) == {"The old north road.": 1.0}
    old.close()
    if not old_still_open:
        del old
        gc.collect()
    remove(path)

    new, camp = memory_bank(path)
    assert add_memory(new.db, camp, "The new south road.", SOUTH) == first  # same id, same campaign, same path
    assert scores(new.db, camp, NORTH) == {"The new south road.": 0.0}
    assert scores(new.db, camp, SOUTH) == {"The new south road.": 1.0}
    new.close()


def test_re_embedding_a_memory_changes_what_recall_scores(tmp_path):
    wb, camp = memory_bank(tmp_path / "bank.db")
    memory_id = add_memory(wb.db, camp, "The road.", NORTH)
    add_memory(wb.db, camp, "The river.", SOUTH)
    assert scores(wb.db, camp, NORTH) == {"The road.": 1.0, "The river.": 0.0}

    with wb.db.writing() as s:
        set_vector(s, s.get(MemoryRow, memory_id), EAST, MODEL, str(wb.db.path))
    assert scores(wb.db, camp, NORTH) == {"The road.": 0.0, "The river.": 0.0}
    assert scores(wb.db, camp, EAST) == {"The road.": 1.0, "The river.": 0.0}

    # A writer that knows only the path (another open copy of the file)
    # invalidates this one too; a recall during its write transaction reads
    # the old vector from its snapshot, and must not keep it.
    other = Database(wb.db.path)
    with other.writing() as s:
        set_vector(s, s.get(MemoryRow, memory_id), NORTH, MODEL, str(other.path))
        assert scores(wb.db, camp, NORTH) == {"The road.": 0.0, "The river.": 0.0}  # not committed yet
    assert scores(wb.db, camp, NORTH) == {"The road.": 1.0, "The river.": 0.0}
    other.close()

    with wb.db.writing() as s:  # no vector: out of recall, not scored from a cached copy
        set_vector(s, s.get(MemoryRow, memory_id), None, "", str(wb.db.path))
    assert scores(wb.db, camp, NORTH) == {"The river.": 0.0}
    wb.close()


def test_an_unchanged_bank_reuses_its_matrix_and_a_new_memory_reads_one_vector(tmp_path, monkeypatch):
    wb, camp = memory_bank(tmp_path / "bank.db")
    rng = np.random.default_rng(5)
    for i in range(20):
        add_memory(wb.db, camp, f"Memory {i}.", rng.normal(size=4))
    reads = blob_reads(wb.db)
    matrices = []
    recall_module = sys.modules["engine.memory.recall"]  # the package exports the function under that name
    real = recall_module.cosines
    monkeypatch.setattr(recall_module, "cosines", lambda m, q: matrices.append(m) or real(m, q))

    query = rng.normal(size=4)
    first = scores(wb.db, camp, query)
    cold = matrices[-1]  # the query has several parts; each is compared with the same matrix
    assert reads == [20] and all(m is cold for m in matrices)
    assert scores(wb.db, camp, query) == first
    assert reads == [20] and matrices[-1] is cold  # warm: nothing read, nothing re-stacked

    add_memory(wb.db, camp, "Memory 20.", query)
    third = scores(wb.db, camp, query)
    assert reads == [20, 1] and third["Memory 20."] == 1.0
    assert matrices[-1].shape == (21, 4)
    with wb.db.reading() as s:  # the held rows are the stored ones, normalised
        stored = dict(s.execute(select(MemoryRow.text, MemoryRow.vector)).all())
    for text, similarity in third.items():
        v = np.frombuffer(stored[text], dtype="<f4")
        assert similarity == round(float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)), 4)
    wb.close()
