"""Storage: one SQLite file through SQLAlchemy 2, versioned by `PRAGMA user_version`."""
from . import (  # noqa: F401  (register their tables)
    cards_tables,
    knowledge_tables,
    memory_tables,
    narrative_tables,
    ratio_tables,
    revision_tables,
)
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
from .revision_tables import NodeRevisionRow

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "Base",
    "BranchRow",
    "CampaignRow",
    "Database",
    "NodeRevisionRow",
    "NodeRow",
    "SavePointRow",
    "SettingRow",
    "TurnRecordRow",
]
