"""The one error the library raises on purpose: an import or change it refuses."""
from __future__ import annotations

from ..errors import WorkbenchError

__all__ = ["KnowledgeRefused"]


class KnowledgeRefused(WorkbenchError, ValueError):
    """Refused with a message that says what to do; nothing was written.

    `conflict` is set when the refusal is a duplicate: it names the source that
    already holds the same content, so a caller can offer to open it instead.
    """

    def __init__(self, message: str, *, conflict: dict | None = None):
        super().__init__(message)
        self.conflict = conflict
