"""The knowledge tables in the file: migration, index, cascade, statement counts."""
import sqlite3

from conftest import ABBEY, CRYPT_SCENE, OSSUARY
from sqlalchemy import event

from engine.knowledge import Library
from engine.store import LATEST, Database
from engine.store.migrations import MIGRATIONS


def test_a_file_from_before_the_library_upgrades_and_keeps_its_story(tmp_path, topic, calibrated):
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN")
    MIGRATIONS[0](raw)
    raw.execute("PRAGMA user_version = 1")
    raw.execute("INSERT INTO campaigns (id, title, created_at, updated_at) VALUES (1, 'Old', '2025-01-01', "
                "'2025-01-01')")
    raw.execute("COMMIT")
    raw.close()
    db = Database(path)
    assert db.version == LATEST
    lib = Library(db, 1, lambda: topic, progress=False)
    assert lib.list().empty
    lib.add("abbey.md", ABBEY, classification="canon")
    assert [p.filename for p in lib.retrieve(CRYPT_SCENE, budget_tokens=6000).passages] == ["abbey.md"]
    names = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert {"knowledge_sources", "knowledge_passages", "knowledge_embeddings", "knowledge_fts",
            "knowledge_passages_fts_insert", "knowledge_passages_fts_delete"} <= names
    db.close()


def test_the_index_uses_porter_and_unicode61(db):
    raw = sqlite3.connect(db.path)
    (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'knowledge_fts'").fetchone()
    assert "fts5" in sql and "porter unicode61" in sql


def statements(db, fn) -> list[str]:
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    for engine in db.engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        fn()
    finally:
        for engine in db.engines:
            event.remove(engine, "before_cursor_execute", record)
    assert seen, "no statement was recorded: the listener is on the wrong engine"
    return seen


def test_statement_counts_do_not_grow_with_the_library(library, db):
    """No per-source or per-passage queries (the N+1 rule)."""
    def grow(n):
        start = len(library.list())
        for i in range(start, n):
            library.add(f"s{i}.md", f"# Crypt {i}\n\n{OSSUARY} Entry {i} of the crypt records.",
                        classification=("canon", "reference", "inspiration")[i % 3])

    counts = {}
    for n in (4, 16):
        grow(n)
        counts[n] = {
            "retrieve": len(statements(db, lambda: library.retrieve(CRYPT_SCENE + " crypt", budget_tokens=8000))),
            "list": len(statements(db, library.list)),
            "status": len(statements(db, library.status)),
        }
    assert counts[4] == counts[16]
    sel = library.retrieve(CRYPT_SCENE + " crypt", budget_tokens=8000)
    assert sel.passages and sel.report["considered"] <= 80
