"""A verified copy of the whole database file, taken while it is in use.

Not the campaign bundle: a bundle is one campaign, logical and portable; a
backup is every campaign, byte for byte, for "copy everything before I
upgrade, move a disk or try something risky".

How one is made, and why:

- SQLite's online backup API copies every page from a connection opened
  read-only (`mode=ro`), so the source cannot be written even by accident;
  in WAL mode the copy holds a read snapshot and turns keep committing;
- the copy goes to `<name>.partial` beside its final name (one directory,
  so the final rename is atomic), is switched out of WAL so it is one
  self-contained file, then checked with `PRAGMA integrity_check` (the full
  check: `quick_check` misses a table that disagrees with its index) and
  `PRAGMA foreign_key_check`;
- only a copy that passed gets its final name, and never over an existing
  file (same second: `-2`, `-3`...); any failure removes the partial file
  and raises `BackupError` with the reason.

There is no restore function on purpose: replacing a database that is open
is how both copies get lost. The README gives the stop, move, start steps.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from .. import html
from ..errors import BackupError

__all__ = ["DIRECTORY_NAME", "STALE_PARTIAL_SECONDS", "Backup", "BackupError", "create", "directory", "existing",
           "stale_partials"]

DIRECTORY_NAME = "backups"
STAMP = "%Y%m%d-%H%M%S"
PARTIAL = ".partial"
_STAMPED = re.compile(r"-(\d{8}-\d{6})(?:-(\d+))?\.db$")
# A partial copy is being written (its mtime moves with every page) or
# verified; an hour without a change is far past either for any file this
# workbench makes (a 73 MB database copies and verifies in about a second), so
# it is what a killed backup left behind.
STALE_PARTIAL_SECONDS = 3600


@dataclass(frozen=True)
class Backup:
    """One backup file. `pages`, `seconds` and `integrity` are known for a
    backup just taken; a listed one only has what its name and size say."""

    path: Path
    bytes: int
    taken_at: datetime
    pages: int | None = None
    seconds: float | None = None
    integrity: str | None = None

    @property
    def filename(self) -> str:
        return self.path.name

    def as_dict(self) -> dict:
        return {"filename": self.filename, "directory": str(self.path.parent), "bytes": self.bytes,
                "taken_at": self.taken_at.isoformat(timespec="seconds"), "pages": self.pages,
                "seconds": None if self.seconds is None else round(self.seconds, 3), "integrity": self.integrity}

    def __str__(self) -> str:
        checked = f", integrity {self.integrity}" if self.integrity else ""
        return f"{self.path} ({self.bytes:,} bytes, taken {self.taken_at:%Y-%m-%d %H:%M:%S}{checked})"

    def _repr_html_(self) -> str:
        return html.fragment("<p>Backup {}</p>", str(self))


def directory(db_path: str | Path) -> Path:
    """`backups/` beside the database: never a place a caller can name."""
    return Path(db_path).resolve().parent / DIRECTORY_NAME


def _unused_name(folder: Path, stem: str, stamp: str) -> Path:
    n = 1
    while True:
        candidate = folder / (f"{stem}-{stamp}.db" if n == 1 else f"{stem}-{stamp}-{n}.db")
        if not candidate.exists() and not candidate.with_name(candidate.name + PARTIAL).exists():
            return candidate
        n += 1


def _discard(working: Path) -> None:
    for path in (working, *(working.with_name(working.name + s) for s in ("-journal", "-wal", "-shm"))):
        try:
            path.unlink()
        except OSError:
            pass  # absent, or beyond help: the error that brought us here is what matters


def _copy(source: Path, working: Path) -> int:
    """Every page of `source`, read-only, into `working`; the pages copied."""
    src = sqlite3.connect(f"file:{quote(str(source))}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(working)
        try:
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
            return dst.execute("PRAGMA page_count").fetchone()[0]
        finally:
            dst.close()
    finally:
        src.close()


def _verify(working: Path) -> str:
    """'ok', or BackupError saying what the checks found."""
    con = sqlite3.connect(f"file:{quote(str(working))}?mode=ro", uri=True)
    try:
        rows = [r[0] for r in con.execute("PRAGMA integrity_check")]
        integrity = ", ".join(str(r) for r in rows) or "no result"
        if integrity != "ok":
            raise BackupError(f"The copy was written but failed its integrity check: {integrity[:500]}.")
        orphans = con.execute("PRAGMA foreign_key_check").fetchall()
        if orphans:
            tables = sorted({r[0] for r in orphans})
            raise BackupError(f"The copy was written but {len(orphans)} row(s) in {', '.join(tables)} point at rows "
                              "that do not exist (foreign_key_check).")
        return integrity
    finally:
        con.close()


def _publish(working: Path, target: Path) -> None:
    """Give the verified copy its name, never over an existing file."""
    try:
        os.link(working, target)  # fails if the target exists, unlike a rename
    except FileExistsError:
        raise BackupError(f"{target.name} appeared while the backup was being made; nothing was overwritten.") \
            from None
    except OSError:  # a file system without hard links: check, then rename
        if target.exists():
            raise BackupError(f"{target.name} already exists; nothing was overwritten.") from None
        os.replace(working, target)
        return
    working.unlink()


def create(db_path: str | Path, *, now: datetime | None = None) -> Backup:
    """Copy, verify, then name: a backup that exists has passed its checks."""
    source = Path(db_path)
    if not source.is_file():
        raise BackupError(f"There is no database at {source}; nothing was backed up.")
    started = time.perf_counter()
    taken = (now or datetime.now()).replace(microsecond=0)
    folder = directory(source)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupError(f"The backup directory {folder} cannot be made: {exc}.") from exc
    for stale in stale_partials(source):
        _discard(stale)
    target = _unused_name(folder, source.stem, taken.strftime(STAMP))
    working = target.with_name(target.name + PARTIAL)
    try:
        pages = _copy(source, working)
        integrity = _verify(working)
        size = working.stat().st_size
        _publish(working, target)
    except BackupError as exc:
        _discard(working)
        raise BackupError(f"{exc} Nothing was kept, and the database itself is untouched.") from exc
    except Exception as exc:  # noqa: BLE001 - every failure is reported in words, with its cause
        _discard(working)
        raise BackupError(f"The backup failed ({type(exc).__name__}: {exc}). Nothing was kept, and the database "
                          "itself is untouched.") from exc
    return Backup(target, size, taken, pages, time.perf_counter() - started, integrity)


def stale_partials(db_path: str | Path, *, now: float | None = None) -> list[Path]:
    """Partial copies a killed backup left in the backup directory: only
    `*.db.partial` files untouched for STALE_PARTIAL_SECONDS, never a finished
    backup and never one another process is still writing."""
    folder = directory(db_path)
    if not folder.is_dir():
        return []
    cutoff = (time.time() if now is None else now) - STALE_PARTIAL_SECONDS
    found = []
    for path in folder.glob("*.db" + PARTIAL):
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                found.append(path)
        except OSError:
            continue  # removed by its own backup while listing
    return sorted(found)


def _taken_at(path: Path) -> datetime:
    """From the stamp in the name (a copied file's mtime is when it was copied), else the mtime."""
    found = _STAMPED.search(path.name)
    if found:
        try:
            return datetime.strptime(found.group(1), STAMP)
        except ValueError:
            pass
    return datetime.fromtimestamp(path.stat().st_mtime).replace(microsecond=0)


def existing(db_path: str | Path) -> list[Backup]:
    """Every `.db` file in the backup directory, newest first. Names and sizes
    only: no file is opened."""
    folder = directory(db_path)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.db"):
        try:
            found.append(Backup(path, path.stat().st_size, _taken_at(path)))
        except OSError:
            continue  # vanished or unreadable while listing
    found.sort(key=lambda b: (b.taken_at, _suffix(b.path), b.filename), reverse=True)
    return found


def _suffix(path: Path) -> int:
    found = _STAMPED.search(path.name)
    return int(found.group(2)) if found and found.group(2) else 1
