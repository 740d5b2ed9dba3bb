"""Narrators (and, later, embedders) behind small protocols."""
from .base import CONTINUE_HINT, Chunk, Narrator, Prompt, Reasoning, Status, Text, Usage

__all__ = ["CONTINUE_HINT", "Chunk", "Narrator", "Prompt", "Reasoning", "Status", "Text", "Usage"]
