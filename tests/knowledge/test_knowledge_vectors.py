"""Passage vectors in the shared cache: refreshed by their (count, newest id)
signature, reading only new rows, and keyed per open database."""
import gc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import ABBEY, CRYPT_SCENE, OSSUARY, SHIP, new_campaign
from sqlalchemy import func, select

from engine.knowledge import Library
from engine.search import DEFAULT, vectors
from engine.store import Database
from engine.store.knowledge_tables import KnowledgeEmbeddingRow
from engine.vectors import unit, unpack

BUDGET = 6000


def blob_reads(monkeypatch) -> list[int]:
    """How many passage vectors each read returns (the reads bypass SQLAlchemy's events)."""
    reads: list[int] = []
    real = vectors._read

    def counted(session, ids):
        found = real(session, ids)
        reads.append(len(found))
        return found

    monkeypatch.setattr(vectors, "_read", counted)
    return reads


def stored(db: Database, campaign: int, model: str) -> dict[int, np.ndarray]:
    """{passage id: its stored vector, normalised}."""
    with db.reading() as s:
        rows = s.execute(select(KnowledgeEmbeddingRow.passage_id, KnowledgeEmbeddingRow.vector).where(
            KnowledgeEmbeddingRow.campaign_id == campaign, KnowledgeEmbeddingRow.model == model)).all()
    return {pid: unit(unpack(blob))[0] for pid, blob in rows}


def held(db: Database, campaign: int, model: str) -> vectors.Matrix:
    with db.reading() as s:
        return vectors.load_matrix(s, vectors.cache_key(db, campaign, model), campaign, model)


def test_a_passage_added_after_the_first_read_is_read_alone(library, db, campaign, topic, monkeypatch):
    library.add("abbey.md", ABBEY, classification="canon")
    reads = blob_reads(monkeypatch)
    assert library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0)).passages
    first = len(stored(db, campaign, topic.model_id))
    assert reads == [first]

    library.add("ossuary.md", OSSUARY, classification="reference")
    total = len(stored(db, campaign, topic.model_id))
    assert total > first
    sel = library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))
    assert reads == [first, total - first]  # only the new rows
    assert {p.filename for p in sel.passages} == {"abbey.md", "ossuary.md"}
    library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(DEFAULT, relative_cut=0.0))
    assert reads == [first, total - first]  # warm: nothing read

    matrix = held(db, campaign, topic.model_id)
    expected = stored(db, campaign, topic.model_id)
    assert len(matrix) == total
    for pid, vector in zip(matrix.passage_ids, matrix.vectors, strict=True):
        assert np.array_equal(vector, expected[int(pid)])


@pytest.mark.parametrize("old_still_open", [True, False])
def test_a_file_made_again_at_the_same_path_never_serves_the_old_files_vectors(tmp_path, topic, calibrated,
                                                                               old_still_open):
    path = tmp_path / "library.db"
    old = Database(path)
    campaign = new_campaign(old)
    Library(old, campaign, lambda: topic, progress=False).add("abbey.md", ABBEY, classification="canon")
    before = held(old, campaign, topic.model_id)
    old.close()
    if not old_still_open:
        del old
        gc.collect()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)

    new = Database(path)
    assert new_campaign(new) == campaign
    library = Library(new, campaign, lambda: topic, progress=False)
    library.add("ship.md", SHIP, classification="canon")
    now = held(new, campaign, topic.model_id)
    # Same path, campaign, model and signature: only the open database tells them apart.
    assert now.signature == before.signature and list(now.passage_ids) == list(before.passage_ids)
    expected = stored(new, campaign, topic.model_id)
    assert all(np.array_equal(v, expected[int(p)]) for p, v in zip(now.passage_ids, now.vectors, strict=True))
    assert not np.array_equal(now.vectors, before.vectors)
    assert [p.filename for p in library.retrieve("The freighter Grey Gull leaves the harbour.",
                                                 budget_tokens=BUDGET).passages] == ["ship.md"]
    assert library.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).passages == ()
    with new.reading() as s:
        assert s.scalar(select(func.count()).select_from(KnowledgeEmbeddingRow)) == len(now)
    new.close()
