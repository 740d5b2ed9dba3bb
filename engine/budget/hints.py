"""The words a provider adds to the story, priced by the builder before it is sent.

Here, below both, because the builder must count what the provider appends.
"""
from __future__ import annotations

__all__ = ["CONTINUE_HINT"]

# Appended to the story for chat models, which otherwise answer the story as a
# request ("Sure! Here is...") instead of continuing it. It follows the turn's
# new content, so it is read again every turn: 18 tokens, where the first
# wording's 27 said the same (the embedded narrator's cache measurement in
# docs/results.md).
CONTINUE_HINT = "Continue the story: write only its next passage, with no preamble, notes or headings."
