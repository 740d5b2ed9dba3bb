"""Storage: one SQLite file through SQLAlchemy 2, versioned by `PRAGMA user_version`."""
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
    "Database",
    "LATEST",
    "MIGRATIONS",
    "Base",
    "BranchRow",
    "CampaignRow",
    "NodeRow",
    "SavePointRow",
    "SettingRow",
    "TurnRecordRow",
]
