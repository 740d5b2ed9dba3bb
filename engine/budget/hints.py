"""The words a provider adds to the story, priced by the builder before it is sent.

Here, below both, because the builder must count what the provider appends.
"""
from __future__ import annotations

__all__ = ["CONTINUE_HINT"]

# Appended to the story for chat models, which otherwise answer the story as a
# request ("Sure! Here is...") instead of continuing it.
CONTINUE_HINT = (
    "Continue the story from where it stops. Write only the next passage of story text, "
    "with no preamble, no notes and no headings."
)
