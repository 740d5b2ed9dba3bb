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


class BagOfWordsEmbedder:
    """Deterministic embeddings: texts sharing words point the same way."""

    model_id = "test-bag-of-words"

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.calls: list[list[str]] = []

    def embed(self, texts):
        import numpy as np

        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                word = word.strip(".,;:!?\"'")
                if len(word) > 3:
                    out[row, sum(map(ord, word)) % self.dim] += 1.0
        return out


class TaskNarrator(ScriptedNarrator):
    """Narrates 'Narration N.', and answers derived-work tasks recognisably:
    a memory echoes the excerpt's last line, a summary carries its base and events."""

    model_id = "task"

    def __init__(self, fail_tasks: tuple[str, ...] = (), memory_reply=None):
        super().__init__()
        self.fail_tasks = fail_tasks
        self.memory_reply = memory_reply
        self.turns = 0
        self.requests: dict[str, list[str]] = {"memory": [], "summary": []}

    def execute(self, prompt):
        if prompt.task in self.fail_tasks:
            from engine.errors import NarratorError

            raise NarratorError("the summary model is unreachable")
        if prompt.task == "memory":
            self.requests["memory"].append(prompt.story)
            excerpt = prompt.story.split("Story excerpt:\n\n", 1)[1].rsplit("\n\nMemory:", 1)[0]
            reply = self.memory_reply(excerpt) if self.memory_reply else "MEM[" + excerpt.split("\n\n")[-1][:60] + "]"
            yield Text(reply)
            return
        if prompt.task == "summary":
            self.requests["summary"].append(prompt.story)
            current = prompt.story.split("Current story summary:\n", 1)[1].split("\n\nNew events", 1)[0]
            events = prompt.story.split("New events since the last update:\n", 1)[1].rsplit("\n\nUpdated summary:", 1)[0]
            base = "" if current == "(none yet)" else current + " | "
            yield Text((base + events.replace("\n", " "))[:1500])
            return
        self.prompts.append(prompt)
        self.turns += 1
        yield Text(f"Narration {self.turns}.")
        yield Usage(prompt_tokens=10, completion_tokens=2)


class RecordingStoryNarrator(TaskNarrator):
    """A long-campaign narrator: varied prose, a state block on some turns, and
    memory / summary answers (from TaskNarrator). Every narration prompt is kept
    in `prompts` in call order, so a test can compare what a take's record
    rebuilds against what the narrator was really sent."""

    model_id = "recording-story"
    PLACES = ("harbour", "chapel", "market", "lighthouse", "crypt", "tannery")

    def execute(self, prompt):
        if prompt.task != "narrate":
            yield from super().execute(prompt)
            return
        self.prompts.append(prompt)
        self.turns += 1
        n = self.turns
        place = self.PLACES[n % len(self.PLACES)]
        prose = (f"Beat {n}: the lamps of the {place} flicker while Mara counts the bells "
                 f"and the tide turns against the {self.PLACES[(n * 7) % len(self.PLACES)]}.")
        if n % 3 == 0:
            prose += ("\n\n```state\n{\"events\": [{\"type\": \"set_scene\", \"summary\": \"At the "
                      f"{place}, beat {n}.\"}}]}}\n```")
        for word in prose.split(" "):
            yield Text(word + " ")
        yield Usage(prompt_tokens=len(prompt.story) // 4, completion_tokens=len(prose.split()))


class StatusNarrator(ScriptedNarrator):
    """Says what it is doing (a Status chunk), then waits until released before
    its first word: the slow start of a model that is loading."""

    def __init__(self, status: str = "Loading the embedded model…"):
        super().__init__(["The lamp turns."])
        self.status = status
        self.announced = threading.Event()
        self.release = threading.Event()

    def execute(self, prompt: Prompt) -> Iterator:
        from engine.providers import Status

        self.prompts.append(prompt)
        yield Status(self.status)
        self.announced.set()
        self.release.wait(10)
        yield Text("The lamp turns.")
