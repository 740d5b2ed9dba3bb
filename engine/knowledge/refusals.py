"""The one error the library raises on purpose (defined with the others in engine.errors)."""
from __future__ import annotations

from ..errors import KnowledgeRefused

__all__ = ["KnowledgeRefused"]
