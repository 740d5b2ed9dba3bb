"""The one error an import raises on purpose."""
from __future__ import annotations

from ..errors import WorkbenchError

__all__ = ["BundleRefused"]


class BundleRefused(WorkbenchError, ValueError):
    """The file was not imported, and nothing was written. The message names
    the problem (and, for an unknown format, the format and version found)."""
