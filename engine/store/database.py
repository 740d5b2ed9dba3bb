"""Opening a workbench file: migrate it, then hand out sessions.

SQLite is used in WAL mode so a reader (a backup, the notebook showing the
story, derived work) never blocks the turn's single commit, and with a busy
timeout so two processes on one file wait for each other instead of failing.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from .migrations import migrate

__all__ = ["Database"]

# Long enough to ride out another process's commit (milliseconds), short
# enough that a wedged writer surfaces as an error rather than a hang.
BUSY_TIMEOUT_MS = 10_000


def _pragmas(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # Transactions are begun by the engine's "begin" event below, not guessed
    # by the driver (which starts none for a SELECT, so a multi-query read
    # could straddle another writer's commit).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


class Database:
    """One SQLite file, migrated to the latest schema."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        raw = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            raw.execute("PRAGMA journal_mode = WAL")
            raw.execute("PRAGMA foreign_keys = OFF")  # schema steps may reference later tables
            self.version = migrate(raw, str(self.path))
        finally:
            raw.close()
        # Two engines on one file: readers BEGIN (a WAL snapshot, never a lock),
        # writers BEGIN IMMEDIATE (the write lock up front, waited for through
        # busy_timeout, so a writer never fails to upgrade a stale snapshot).
        self.engine: Engine = self._engine("BEGIN IMMEDIATE")
        self._read_engine: Engine = self._engine("BEGIN")
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._reads = sessionmaker(self._read_engine, expire_on_commit=False)

    def _engine(self, begin: str) -> Engine:
        engine = create_engine(f"sqlite:///{self.path}")
        event.listen(engine, "connect", _pragmas)
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql(begin))
        return engine

    @property
    def engines(self) -> tuple[Engine, Engine]:
        """(writer, reader): for instrumentation, e.g. counting statements."""
        return self.engine, self._read_engine

    def session(self) -> Session:
        return self._sessions()

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A session that only reads, from one consistent snapshot: nothing it
        does is ever committed (closing discards it), and rows read through it
        stay readable afterwards."""
        with self._reads() as session:
            yield session

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A session whose work is committed once at the end, or not at all."""
        with self._sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def close(self) -> None:
        self.engine.dispose()
        self._read_engine.dispose()
