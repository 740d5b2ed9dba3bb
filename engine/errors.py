"""Every error the workbench raises on purpose, in one module (as httpx keeps its exceptions).

`from engine import BundleRefused` (or any name here) works for all of them;
the modules that raise them import them from here.

Each message says what was wrong and what to do about it; a notebook user
should never need the traceback to know their next step.
"""
from __future__ import annotations

__all__ = [
    "BackupError",
    "BrokenStory",
    "BundleRefused",
    "CardRefused",
    "ContextOverflow",
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


class ContextOverflow(TurnFailed):
    """What may not be dropped does not fit the budget: no prompt can be built."""


class BrokenStory(WorkbenchError):
    """A campaign's story tree cannot be read: a branch is its own ancestor,
    or forks from a branch that is not there. `branch` is the one named."""

    def __init__(self, message: str, *, branch=None):
        super().__init__(message)
        self.branch = branch


class BundleRefused(WorkbenchError, ValueError):
    """The file was not imported, and nothing was written. The message names
    the problem (and, for an unknown format, the format and version found)."""


class CardRefused(WorkbenchError, ValueError):
    """A card was not added or changed, and nothing was written; the message
    says which value was wrong and what is accepted."""


class KnowledgeRefused(WorkbenchError, ValueError):
    """Refused with a message that says what to do; nothing was written.

    `conflict` is set when the refusal is a duplicate: it names the source that
    already holds the same content, so a caller can offer to open it instead.
    """

    def __init__(self, message: str, *, conflict: dict | None = None):
        super().__init__(message)
        self.conflict = conflict


class BackupError(WorkbenchError):
    """A backup did not complete; nothing was left behind and the database is untouched."""


# ------------------------------------------------------------ media (engine.media)
class MediaError(WorkbenchError, ValueError):
    """A media request that cannot be made as asked (an unknown kind, a blank
    provider name, a scene range that is not a depth on the story being read)."""


class ProfileError(MediaError):
    """A visual profile that cannot be stored: an unknown entity, a value too
    long, or a shape that is not the one described. Nothing was written."""


class MediaProviderError(WorkbenchError, RuntimeError):
    """A media provider failed (its server is down, its program is missing).
    Media never writes the story, so there is nothing to undo."""


class MediaEndpointRefused(MediaError):
    """A media server address that is not on this machine (or that the
    narrator's address policy already refuses); nothing was sent."""


class ModelMismatch(NarratorUnavailable):
    """An unpacked model's weights are not the ones this workbench was measured with."""
