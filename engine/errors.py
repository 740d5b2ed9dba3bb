"""Every error the workbench raises on purpose.

Each message says what was wrong and what to do about it; a notebook user
should never need the traceback to know their next step.
"""
from __future__ import annotations

__all__ = [
    "NarratorError",
    "NarratorUnavailable",
    "NotADatabase",
    "NotAllowed",
    "NotFound",
    "SchemaTooNew",
    "TurnCancelled",
    "TurnFailed",
    "TurnInProgress",
    "WorkbenchError",
]


class WorkbenchError(Exception):
    """Base class: anything the workbench refuses or fails at, in words."""


class SchemaTooNew(WorkbenchError):
    """The database was written by a newer version of the workbench."""


class NotFound(WorkbenchError):
    """A campaign, node, take or save point that does not exist."""


class NotADatabase(WorkbenchError):
    """The path given to open is a folder, or a file that is not a SQLite database."""


class NotAllowed(WorkbenchError):
    """A story operation that does not apply where the story is now."""


class TurnInProgress(WorkbenchError):
    """Another turn of the same campaign is still running."""


class TurnFailed(WorkbenchError):
    """A turn could not be completed; nothing was written."""


class TurnCancelled(TurnFailed):
    """The reader stopped the turn; nothing was written."""


class NarratorError(WorkbenchError):
    """The narrator failed while generating (connection, HTTP, model)."""


class NarratorUnavailable(NarratorError):
    """The configured narrator cannot be used on this machine."""
