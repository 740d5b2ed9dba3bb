"""What the media seam refuses, each in words a notebook user can act on."""
from __future__ import annotations

from ..errors import WorkbenchError
from ..providers.endpoints import EndpointRefused

__all__ = ["MediaEndpointRefused", "MediaError", "MediaProviderError", "ProfileError"]


class MediaError(WorkbenchError, ValueError):
    """A media request that cannot be made as asked (an unknown kind, a blank
    provider id, a scene range that is not a depth)."""


class ProfileError(MediaError):
    """A visual profile that cannot be stored: an unknown entity, a value too
    long, or a shape that is not the one described."""


class MediaProviderError(WorkbenchError, RuntimeError):
    """A provider failed (its server is down, its binary is missing). The
    story is never touched by media, so nothing needs undoing."""


class MediaEndpointRefused(EndpointRefused, WorkbenchError):
    """A media endpoint that is not on this machine. Still an
    `EndpointRefused`, so code that catches the narrator's refusal catches
    this one too."""
