"""The story workbench engine: story tree, narrators, context, turns.

    from engine import Workbench
    wb = Workbench.open("my.db")
    camp = wb.new_campaign("Westhaven", premise="...", protagonist="Aldric")
    camp.act("I show Mara the sealed letter.")
"""
from .bundle import backup  # the backups module, under the name it had before it moved into bundle/
from .campaign import Campaign
from .errors import (
    BackupError,
    BrokenStory,
    BundleRefused,
    CardRefused,
    ContextOverflow,
    KnowledgeRefused,
    MediaEndpointRefused,
    MediaError,
    MediaProviderError,
    ModelMismatch,
    NarratorError,
    NarratorUnavailable,
    NotADatabase,
    NotAllowed,
    NotFound,
    ProfileError,
    SchemaTooNew,
    TurnCancelled,
    TurnFailed,
    TurnInProgress,
    WorkbenchError,
)
from .settings import Settings
from .views import Entry, SavePoint, Turn
from .workbench import Workbench

__all__ = [
    "BackupError",
    "BrokenStory",
    "BundleRefused",
    "Campaign",
    "CardRefused",
    "ContextOverflow",
    "Entry",
    "KnowledgeRefused",
    "ModelMismatch",
    "MediaEndpointRefused",
    "MediaError",
    "MediaProviderError",
    "NarratorError",
    "NarratorUnavailable",
    "NotADatabase",
    "NotAllowed",
    "NotFound",
    "ProfileError",
    "SavePoint",
    "SchemaTooNew",
    "Settings",
    "Turn",
    "TurnCancelled",
    "TurnFailed",
    "TurnInProgress",
    "Workbench",
    "WorkbenchError",
    "backup",
]
