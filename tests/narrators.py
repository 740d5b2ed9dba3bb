"""Test narrators. They live here, never in engine/ (the engine only knows the
`Narrator` protocol); conftest.py hands them out as fixtures."""
from __future__ import annotations

import threading
from collections.abc import Iterator

from engine.providers import Prompt, Reasoning, Text, Usage
from engine.providers.window import LOADED, UNKNOWN, Window


class ScriptedNarrator:
    """Replies from a script (cycling), in word-sized chunks, recording every prompt."""

    model_id = "scripted"

    def __init__(self, replies=None, window: int | None = None, reasoning: str | None = None):
        self.replies = list(replies or ["The wind moves through the trees."])
        self.window = window
        self.reasoning = reasoning
        self.prompts: list[Prompt] = []

    def context_window(self) -> Window:
        if self.window is None:
            return Window(None, UNKNOWN, detail="a scripted narrator has no window")
        return Window(self.window, LOADED, detail="scripted", reachable=True)

    def execute(self, prompt: Prompt) -> Iterator:
        self.prompts.append(prompt)
        reply = self.replies[(len(self.prompts) - 1) % len(self.replies)]
        if self.reasoning:
            yield Reasoning(self.reasoning)
        for i, word in enumerate(reply.split(" ")):
            yield Text(word if i == 0 else " " + word)
        yield Usage(prompt_tokens=len(prompt.system.split()) + len(prompt.story.split()),
                    completion_tokens=len(reply.split()))


class CountingNarrator(ScriptedNarrator):
    """Each reply says which call it was: 'Narration 1.', 'Narration 2.'..."""

    def execute(self, prompt: Prompt) -> Iterator:
        self.replies = [f"Narration {len(self.prompts) + 1}."]
        self.prompts.append(prompt)
        yield Text(self.replies[0])
        yield Usage(prompt_tokens=10, completion_tokens=2)


class FailingNarrator(ScriptedNarrator):
    """Streams some words, then fails like a dropped connection."""

    def __init__(self, error: Exception | None = None, after: int = 3):
        super().__init__(["one two three four five six"])
        self.error = error or ConnectionError("connection reset by peer")
        self.after = after

    def execute(self, prompt: Prompt) -> Iterator:
        self.prompts.append(prompt)
        for i, word in enumerate(self.replies[0].split()):
            if i == self.after:
                raise self.error
            yield Text(word + " ")


class BlockingNarrator(ScriptedNarrator):
    """Streams one word, then waits until released: a turn held open on purpose."""

    def __init__(self):
        super().__init__(["first second third"])
        self.started = threading.Event()
        self.release = threading.Event()

    def execute(self, prompt: Prompt) -> Iterator:
        self.prompts.append(prompt)
        yield Text("first")
        self.started.set()
        self.release.wait(10)
        yield Text(" second third")
