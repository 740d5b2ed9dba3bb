"""Files and processes: opening races, wrong paths, leftovers of killed backups."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time

import pytest

from engine import Workbench, backup
from engine.errors import NotADatabase, NotFound
from engine.store.database import Database
from engine.store.migrations import LATEST


def _open_at_once(path, barrier, results):
    barrier.wait()
    try:
        Database(path).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_three_processes_opening_a_brand_new_file_all_succeed(tmp_path):
    context = multiprocessing.get_context("fork")  # forked after import: the race is the open, not the import
    outcomes = []
    for round_ in range(8):
        path = tmp_path / f"new-{round_}.db"
        barrier, results = context.Barrier(3), context.Queue()
        workers = [context.Process(target=_open_at_once, args=(path, barrier, results)) for _ in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        outcomes += [results.get(timeout=5) for _ in workers]
        con = sqlite3.connect(path)
        assert con.execute("PRAGMA user_version").fetchone()[0] == LATEST
        con.close()
    assert outcomes == ["ok"] * 24, [o for o in outcomes if o != "ok"]


def test_a_text_file_is_refused_by_name_and_left_alone(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Shopping: bread, candles, lamp oil.\n" * 200)
    before = notes.read_bytes()
    with pytest.raises(NotADatabase) as caught:
        Workbench.open(notes)
    assert str(notes) in str(caught.value) and "new file name" in str(caught.value)
    assert notes.read_bytes() == before


def test_a_folder_is_refused_with_a_path_to_use_instead(tmp_path):
    with pytest.raises(NotADatabase, match="is a folder") as caught:
        Workbench.open(tmp_path)
    assert str(tmp_path / "workbench.db") in str(caught.value)


def test_a_missing_folder_is_named_and_not_created(tmp_path):
    target = tmp_path / "no" / "such" / "place.db"
    with pytest.raises(NotFound, match="does not exist") as caught:
        Workbench.open(target)
    assert str(target.parent) in str(caught.value)
    assert not (tmp_path / "no").exists()


def _database(tmp_path):
    wb = Workbench.open(tmp_path / "story.db", background=False)
    wb.new_campaign("Westhaven", premise="A port town.")
    wb.close()
    return tmp_path / "story.db"


def test_a_killed_backups_partial_is_cleaned_by_the_next_backup(tmp_path):
    path = _database(tmp_path)
    finished = backup.create(path)
    folder = backup.directory(path)
    stale = folder / "story-20260101-000000.db.partial"
    stale.write_bytes(b"half a copy" * 1000)
    hour_ago = time.time() - backup.STALE_PARTIAL_SECONDS - 60
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(finished.path, (hour_ago, hour_ago))  # old, but finished: never touched
    fresh = folder / "story-20260101-000001.db.partial"
    fresh.write_bytes(b"being written now")

    assert backup.stale_partials(path) == [stale]
    taken = backup.create(path)

    assert not stale.exists()
    assert fresh.exists(), "a partial another backup may still be writing was removed"
    assert finished.path.exists() and taken.path.exists()
    assert {b.path for b in backup.existing(path)} == {finished.path, taken.path}


def test_a_knowledge_file_one_byte_too_large_says_by_how_much(camp, monkeypatch):
    from engine.knowledge import intake
    from engine.knowledge.refusals import KnowledgeRefused

    monkeypatch.setattr(intake, "MAX_SOURCE_BYTES", 1024 * 1024)
    with pytest.raises(KnowledgeRefused) as caught:
        camp.knowledge.add("big.md", "a" * (1024 * 1024 + 1))
    assert "1,048,577 bytes" in str(caught.value) and "1,048,576 bytes" in str(caught.value)


def test_a_file_held_locked_while_it_needs_migrating_says_so(tmp_path, monkeypatch):
    """Another process holds the write lock of a file that needs a migration:
    the open fails in words about the lock, not as "not a database"."""
    import sqlite3

    from engine.errors import NotADatabase, WorkbenchError
    from engine.store import database

    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 200)
    monkeypatch.setattr(database, "MIGRATION_ATTEMPTS", 2)
    try:
        with pytest.raises(WorkbenchError) as refused:
            Database(path)
        assert not isinstance(refused.value, NotADatabase)
        assert "locked by another process" in str(refused.value) and str(path) in str(refused.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert Database(path).version > 0  # once released, it opens
