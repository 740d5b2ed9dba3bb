"""The narrator seam: a prompt goes in, chunks stream out.

A narrator is one small class with an `execute` that yields `Text`,
`Reasoning` and finally `Usage` chunks (the shape of simonw/llm's models).
The turn loop never knows which narrator it talks to.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..budget.hints import CONTINUE_HINT

if TYPE_CHECKING:
    from .window import Window

__all__ = ["CONTINUE_HINT", "Chunk", "Narrator", "Prompt", "Reasoning", "Status", "Text", "Usage"]

@dataclass(frozen=True)
class Prompt:
    system: str
    story: str
    max_tokens: int = 200
    temperature: float = 0.8
    # "narrate" continues the story (the provider appends CONTINUE_HINT);
    # anything else ("memory", "summary") is an instruction answered as asked.
    task: str = "narrate"
    # The reply's first words, written by the engine (engine.narrative.reply_opening):
    # a narrator that can continue a reply it did not start (`continues_opening`)
    # writes on from them, and the words are not part of what it returns.
    opening: str = ""
    # Words the reply should name (engine.narrative.steer_words): a narrator
    # that can bias its own sampling (`steers`) favours them until one is written.
    steer: tuple[str, ...] = ()
    # Samplers the reader set (engine.settings.SAMPLERS); None and () mean
    # "not set": nothing is sent, and the narrator keeps its own default.
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    stop: tuple[str, ...] = ()

    @property
    def sampling(self) -> dict:
        """The samplers set for this prompt, as they are sent (only those set)."""
        out = {k: v for k, v in (("top_p", self.top_p), ("min_p", self.min_p),
                                 ("repeat_penalty", self.repeat_penalty)) if v is not None}
        return {**out, "stop": list(self.stop)} if self.stop else out

    @property
    def user_text(self) -> str:
        return f"{self.story}\n\n{CONTINUE_HINT}" if self.task == "narrate" else self.story


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Reasoning:
    text: str


@dataclass(frozen=True)
class Status:
    """What the narrator is doing before (or between) words: loading a model,
    reading N prompt tokens. Shown to the reader, never stored as story; a
    prompt of thousands of tokens can take a minute before its first word."""

    text: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # What the server (or the embedded model) says of its prompt cache, when it
    # says anything: tokens served from cache, tokens it evaluated this turn,
    # and its own prompt-processing and generation times. None when unknown.
    cached_tokens: int | None = None
    processed_tokens: int | None = None
    prompt_ms: float | None = None
    generation_ms: float | None = None

    def as_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens, "processed_tokens": self.processed_tokens,
                "prompt_ms": self.prompt_ms, "generation_ms": self.generation_ms}


Chunk = Text | Reasoning | Status | Usage


@runtime_checkable
class Narrator(Protocol):
    """Anything that can narrate: embedded, an HTTP endpoint, a test script."""

    model_id: str

    def execute(self, prompt: Prompt) -> Iterator[Chunk]:
        """Stream the reply. Closing the iterator early must stop generation."""
        ...

    def context_window(self) -> Window:
        """The window the model really runs with, and how that is known."""
        ...
