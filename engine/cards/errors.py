"""The one error the card API raises on purpose."""
from __future__ import annotations

from ..errors import WorkbenchError

__all__ = ["CardRefused"]


class CardRefused(WorkbenchError, ValueError):
    """A card was not added or changed, and nothing was written; the message
    says which value was wrong and what is accepted."""
