"""Verified whole-database backups (BK-01..08). Every test opens the copy as
a database of its own and reads it: a test that only saw a file appear would
pass against a plain `cp`."""
import os
import re
import sqlite3
import threading
import time
from datetime import datetime

import pytest
from narrators import ScriptedNarrator

from engine import Workbench, backup
from engine.bundle import facade
from engine.story.lineage import path_to


@pytest.fixture
def played(tmp_path):
    wb = Workbench.open(tmp_path / "story.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["Beat."]), embedder="none", memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("Backed up", opening="The story opens.")
    for i in range(3):
        camp.act(f"step {i}")
    yield wb, camp
    wb.close()


def read_only(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def listing(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def head_line(con, campaign_id):
    """(depths on the head's path, whether a node sits at the head)."""
    branch, depth = con.execute("SELECT head_branch_id, head_depth FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    table = {b: (p, f) for b, p, f in con.execute(
        "SELECT id, parent_id, fork_depth FROM branches WHERE campaign_id = ?", (campaign_id,))}
    path = path_to(table, branch, depth)
    nodes = con.execute("SELECT branch_id, depth FROM nodes WHERE campaign_id = ?", (campaign_id,)).fetchall()
    on_path = sorted(d for b, d in nodes if path.contains(b, d))
    return on_path, depth, path.contains(branch, depth) and (path.branch_at(depth), depth) in set(nodes)


def test_a_backup_is_a_verified_self_contained_copy(played):
    wb, camp = played
    made = wb.backup()
    assert made.integrity == "ok" and made.pages > 0 and made.bytes == made.path.stat().st_size > 0
    assert re.fullmatch(r"story-\d{8}-\d{6}\.db", made.filename) and made.path.parent.name == "backups"
    assert made.path.parent.parent == wb.db.path.parent
    assert listing(made.path.parent) == [made.filename]  # no .partial, no -wal beside it
    con = read_only(made.path)
    try:
        assert con.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"campaigns", "branches", "nodes", "turn_records", "save_points", "memories", "summaries",
                "state_events", "knowledge_sources", "knowledge_passages", "story_cards", "settings"} <= tables
        texts = [r[0] for r in con.execute("SELECT text FROM nodes ORDER BY depth")]
        assert texts[0] == "The story opens." and "Beat." in texts
        assert con.execute("SELECT title FROM campaigns").fetchone()[0] == "Backed up"
        depths, head, exists = head_line(con, camp.id)
        assert depths == list(range(head + 1)) and exists
    finally:
        con.close()
    assert made.as_dict()["integrity"] == "ok" and "Backup" in made._repr_html_()


def test_the_copy_holds_every_family_of_row(played):
    from engine.knowledge import Library

    wb, camp = played
    camp.save_point("Here")
    Library(wb.db, camp.id, progress=False).add("canon.md", "# Canon\n\nThe dead do not return.\n",
                                                classification="canon")
    camp.correct({"type": "create_entity", "entity": "mara", "entity_type": "character", "name": "Mara"})
    con = read_only(wb.backup().path)
    try:
        assert con.execute("SELECT name FROM save_points").fetchall() == [("Here",)]
        assert con.execute("SELECT count(*) FROM knowledge_sources").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM knowledge_passages").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM state_events").fetchone()[0] == 1
        assert '"mara"' in con.execute("SELECT state FROM campaigns").fetchone()[0]
    finally:
        con.close()


def test_a_backup_taken_while_turns_commit_is_consistent(played):
    wb, camp = played
    landed, failures, stop = [], [], threading.Event()

    def writer():
        try:
            for i in range(40):
                if stop.is_set():
                    break
                camp.act(f"walk {i}")
                landed.append(i)
                time.sleep(0.005)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    while len(landed) < 3 and thread.is_alive():
        time.sleep(0.005)
    made = wb.backup()
    stop.set()
    thread.join(60)
    assert not failures and landed
    con = read_only(made.path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        depths, head, exists = head_line(con, camp.id)
        assert depths == list(range(head + 1)) and exists and head >= 12  # 3 turns before, 3 more landed
    finally:
        con.close()


def test_the_source_file_is_not_changed_by_a_backup(played):
    wb, _ = played
    files = [wb.db.path, wb.db.path.with_name(wb.db.path.name + "-wal")]
    before = [f.read_bytes() if f.exists() else None for f in files]
    wb.backup()
    assert [f.read_bytes() if f.exists() else None for f in files] == before


def test_backups_never_overwrite_even_within_one_second(played):
    wb, _ = played
    moment = datetime(2026, 9, 7, 4, 30, 0)
    first = backup.create(wb.db.path, now=moment)
    content = first.path.read_bytes()
    second = backup.create(wb.db.path, now=moment)
    third = backup.create(wb.db.path, now=moment)
    assert first.filename == "story-20260907-043000.db"
    assert second.filename == "story-20260907-043000-2.db" and third.filename == "story-20260907-043000-3.db"
    assert first.path.read_bytes() == content
    assert [b.filename for b in wb.backups()] == [third.filename, second.filename, first.filename]


def test_a_failed_verification_leaves_nothing(played, monkeypatch):
    wb, _ = played
    folder = backup.directory(wb.db.path)
    folder.mkdir(exist_ok=True)
    before = listing(folder)

    def failing(path):
        raise backup.BackupError("bad pages")

    monkeypatch.setattr(backup, "_verify", failing)
    with pytest.raises(backup.BackupError, match="bad pages"):
        wb.backup()
    assert listing(folder) == before


def test_a_failed_copy_says_why_and_leaves_nothing(played, monkeypatch):
    wb, _ = played
    folder = backup.directory(wb.db.path)

    def failing(source, working):
        working.write_bytes(b"half a page")
        raise OSError("disk full")

    monkeypatch.setattr(backup, "_copy", failing)
    with pytest.raises(backup.BackupError, match="disk full"):
        wb.backup()
    assert listing(folder) == []


def test_a_damaged_copy_is_caught_by_the_check_and_discarded(played, monkeypatch):
    wb, _ = played
    real = backup._copy

    def damaging(source, working):
        pages = real(source, working)
        with open(working, "r+b") as f:  # scribble over the middle of the file: btree pages
            size = os.path.getsize(working)
            f.seek(size // 2)
            f.write(b"\xff" * 8192)
        return pages

    monkeypatch.setattr(backup, "_copy", damaging)
    with pytest.raises(backup.BackupError):
        wb.backup()
    assert listing(backup.directory(wb.db.path)) == []


def test_a_copy_with_dangling_references_is_refused(played):
    wb, camp = played
    raw = sqlite3.connect(wb.db.path)
    raw.execute("PRAGMA foreign_keys = OFF")
    raw.execute("INSERT INTO save_points (campaign_id, name, note, branch_id, depth, created_at) "
                "VALUES (?, 'dangling', '', 9999, 0, '2026-01-01 00:00:00')", (camp.id,))
    raw.commit()
    raw.close()
    with pytest.raises(backup.BackupError, match="foreign_key_check"):
        wb.backup()
    assert listing(backup.directory(wb.db.path)) == []


def test_a_missing_database_is_reported(tmp_path):
    with pytest.raises(backup.BackupError, match="no database"):
        backup.create(tmp_path / "absent.db")
    assert not (tmp_path / "backups").exists()


def test_listing_orders_by_the_stamp_in_the_name_and_keeps_foreign_files(played):
    wb, _ = played
    folder = backup.directory(wb.db.path)
    folder.mkdir(exist_ok=True)
    for name in ("story-20260901-100000.db", "story-20260906-100000.db", "handwritten.db"):
        (folder / name).write_bytes(b"x")
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))  # same mtime for all: only names can order
    (folder / "story-20260907-100000.db.partial").write_bytes(b"x")  # never listed
    found = wb.backups()
    assert [b.filename for b in found] == ["story-20260906-100000.db", "story-20260901-100000.db", "handwritten.db"]
    assert found[0].taken_at.isoformat().startswith("2026-09-06T10:00")
    assert found[2].taken_at == datetime.fromtimestamp(1_000_000_000)


def test_there_is_no_restore(played):
    assert not any("restore" in name for name in dir(backup)) and not hasattr(facade, "restore")


def test_a_closed_database_without_a_wal_is_backed_up_too(tmp_path):
    wb = Workbench.open(tmp_path / "quiet.db")
    wb.new_campaign("Quiet", opening="Nothing moves.")
    wb.close()
    before = (tmp_path / "quiet.db").read_bytes()
    made = backup.create(tmp_path / "quiet.db")
    assert made.integrity == "ok" and (tmp_path / "quiet.db").read_bytes() == before
    con = read_only(made.path)
    try:
        assert con.execute("SELECT text FROM nodes").fetchall() == [("Nothing moves.",)]
    finally:
        con.close()
