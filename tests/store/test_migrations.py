import sqlite3

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from engine import SchemaTooNew, Workbench
from engine.store import LATEST, Base, Database, migrations


def test_fresh_file_is_at_latest_version(db_path):
    Database(db_path).close()
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST


def test_orm_maps_exactly_the_migrated_schema(db_path):
    """The SQL in migrations and the ORM classes must never drift apart."""
    db = Database(db_path)
    insp = inspect(db.engine)
    # FTS5 virtual tables and their shadow tables are SQL-only, never ORM-mapped.
    mapped = {n for n in insp.get_table_names() if not n.startswith("knowledge_fts")}
    assert mapped == set(Base.metadata.tables)
    for name, table in Base.metadata.tables.items():
        in_file = {c["name"]: c for c in insp.get_columns(name)}
        assert set(in_file) == {c.name for c in table.columns}, name
        for column in table.columns:
            if column.primary_key:  # SQLite reports rowid aliases as nullable
                continue
            assert in_file[column.name]["nullable"] == column.nullable, (name, column.name)
        fks_file = {(tuple(fk["constrained_columns"]), fk["referred_table"]) for fk in insp.get_foreign_keys(name)}
        fks_orm = {((fk.parent.name,), fk.column.table.name) for fk in table.foreign_keys}
        assert fks_file == fks_orm, name


def test_newer_schema_is_refused_and_left_untouched(db_path):
    Database(db_path).close()
    raw = sqlite3.connect(db_path)
    raw.execute(f"PRAGMA user_version = {LATEST + 5}")
    raw.commit()
    raw.close()
    before = db_path.read_bytes()
    with pytest.raises(SchemaTooNew) as err:
        Workbench.open(db_path)
    message = str(err.value)
    assert f"schema version {LATEST + 5}" in message
    assert "newer workbench" in message and "upgrade" in message.lower()
    assert db_path.read_bytes() == before


def test_a_failing_migration_leaves_the_previous_version(db_path, monkeypatch):
    Database(db_path).close()

    def broken(db):
        db.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS + [broken])
    monkeypatch.setattr(migrations, "LATEST", LATEST + 1)
    with pytest.raises(RuntimeError):
        Database(db_path)
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == LATEST
    assert not raw.execute("SELECT name FROM sqlite_master WHERE name='half_done'").fetchall()


def test_reopening_runs_nothing_twice(db_path):
    Database(db_path).close()
    Database(db_path).close()  # would fail with "table already exists" otherwise


def test_foreign_keys_are_enforced(wb):
    from engine.store import NodeRow

    with pytest.raises(IntegrityError):
        with wb.db.writing() as s:
            s.add(NodeRow(campaign_id=999, branch_id=999, depth=0, kind="narrator", text="x", state_after={}))


def test_branch_holding_a_save_point_cannot_be_deleted(camp, wb):
    camp.act("look around")
    camp.save_point("here")
    branch_id, _ = camp.head
    with pytest.raises(IntegrityError):
        with wb.db.writing() as s:
            s.execute(__import__("sqlalchemy").text("DELETE FROM branches WHERE id = :b"), {"b": branch_id})
    assert camp.save_points()[0].name == "here"


def test_a_reading_session_sees_one_snapshot_and_writers_wait_not_fail(db_path):
    import threading

    from sqlalchemy import text

    db = Database(db_path)
    with db.writing() as s:
        s.execute(text("INSERT INTO settings (key, value) VALUES ('a', '1')"))
    with db.reading() as r:
        before = r.execute(text("SELECT count(*) FROM settings")).scalar()
        with db.writing() as w:  # another writer commits while the read is open
            w.execute(text("INSERT INTO settings (key, value) VALUES ('b', '2')"))
        assert r.execute(text("SELECT count(*) FROM settings")).scalar() == before == 1
    errors = []

    def write(key):
        try:
            with db.writing() as w:
                w.execute(text("SELECT count(*) FROM settings")).scalar()
                w.execute(text("INSERT INTO settings (key, value) VALUES (:k, '3')"), {"k": key})
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with db.reading() as r:
        assert r.execute(text("SELECT count(*) FROM settings")).scalar() == 10
