"""Storage: one SQLite file through SQLAlchemy 2, versioned by `PRAGMA user_version`."""
from . import cards_tables, knowledge_tables, memory_tables, narrative_tables, ratio_tables  # noqa: F401  (register their tables)
from .database import Database
from .migrations import LATEST, MIGRATIONS
from .models import (
    Base,
    BranchRow,
    CampaignRow,
    NodeRow,
    SavePointRow,
    SettingRow,
    TurnRecordRow,
)

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "Base",
    "BranchRow",
    "CampaignRow",
    "Database",
    "NodeRow",
    "SavePointRow",
    "SettingRow",
    "TurnRecordRow",
]
