"""The narrative tables: their migration step (SQL) and their ORM mapping.

Kept beside each other so the parity test in tests/store/test_migrations.py
can hold them together.
"""
from __future__ import annotations

from sqlite3 import Connection

from .models import Base  # noqa: F401  (ORM classes for these tables subclass Base)

__all__ = ["migrate"]


def migrate(db: Connection) -> None:
    """Creates the narrative tables (filled in by the narrative work)."""
