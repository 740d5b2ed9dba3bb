"""Opening a workbench file: migrate it, then hand out sessions.

SQLite is used in WAL mode so a reader (a backup, the notebook showing the
story, derived work) never blocks the turn's single commit, and with a busy
timeout so two processes on one file wait for each other instead of failing.
"""
from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from ..errors import NotADatabase, NotFound, WorkbenchError
from .migrations import migrate

__all__ = ["Database"]

# Long enough to ride out another process's commit (milliseconds), short
# enough that a wedged writer surfaces as an error rather than a hang.
BUSY_TIMEOUT_MS = 10_000
# Three processes opening one brand-new file at once: each read the schema
# version before another's first step committed, and 15-21 of 60 opens failed
# ("table campaigns already exists", "database is locked"). Each migration step
# now takes the write lock and reads the version inside it, so a racing opener
# waits (busy_timeout) and then finds the step done; a few attempts remain for
# the journal-mode switch of a file another process is creating. Each attempt
# can wait the whole busy timeout, so a file held locked fails in ~30 s, not 400.
MIGRATION_ATTEMPTS = 3


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


def _check_place(path: Path) -> None:
    """A folder is never created on the caller's behalf: a typo in a path
    would otherwise start an empty workbench somewhere unexpected."""
    if path.is_dir():
        raise NotADatabase(f"{path} is a folder, not a database file. Give a file path inside it, "
                           f"for example {path / 'workbench.db'}.")
    if not path.parent.is_dir():
        raise NotFound(f"The folder {path.parent} does not exist, so {path.name} cannot be created there. "
                       "Create the folder first, or choose a path in one that exists.")


def _open_and_migrate(path: Path) -> int:
    raw = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        return _migrate_racing(raw, path)
    except sqlite3.OperationalError as exc:
        if not _lost_race(exc):
            raise _not_a_database(path, exc) from None
        raise WorkbenchError(f"{path} stayed locked by another process for {BUSY_TIMEOUT_MS // 1000} s while it was "
                             "being opened (another kernel may be writing to it or holding it open mid-write). "
                             "Finish or stop that work, or close that kernel, then open it again.") from None
    except sqlite3.DatabaseError as exc:
        raise _not_a_database(path, exc) from None
    finally:
        raw.close()


def _not_a_database(path: Path, exc: Exception) -> NotADatabase:
    return NotADatabase(f"{path} could not be opened as a workbench database ({exc}). It may be another kind "
                           "of file, damaged, or not readable by you. Open a .db file the workbench made, or give "
                           "a new file name to start one.")


def _migrate_racing(raw: sqlite3.Connection, path: Path) -> int:
    """Migrates, starting again from the file's version when another process
    was migrating the same file at the same moment."""
    for attempt in range(MIGRATION_ATTEMPTS):
        try:
            raw.execute("PRAGMA journal_mode = WAL")
            raw.execute("PRAGMA foreign_keys = OFF")  # schema steps may reference later tables
            return migrate(raw, str(path))
        except sqlite3.OperationalError as exc:
            if not _lost_race(exc) or attempt == MIGRATION_ATTEMPTS - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("MIGRATION_ATTEMPTS must be at least 1")


def _lost_race(exc: sqlite3.OperationalError) -> bool:
    busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return busy or "already exists" in str(exc) or "locked" in str(exc)


class Database:
    """One SQLite file, migrated to the latest schema."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        _check_place(self.path)
        self.version = _open_and_migrate(self.path)
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
