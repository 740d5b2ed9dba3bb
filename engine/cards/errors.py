"""The one error the card API raises on purpose (defined with the others in engine.errors)."""
from __future__ import annotations

from ..errors import CardRefused

__all__ = ["CardRefused"]
