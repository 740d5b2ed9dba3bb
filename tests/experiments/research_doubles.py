"""Instant narrators for the replay, compare and ablation tests.

Importable by name ("research_doubles:CachingNarrator") so Dask workers, which
start in fresh processes, can build them from a Factory with this folder as path.
"""
from __future__ import annotations

from engine.providers import Text, Usage
from engine.providers.window import LOADED, Window

__all__ = ["CachingNarrator", "EchoNarrator"]


def _words(prompt) -> list[str]:
    return (prompt.system + "\n\n" + prompt.user_text).split()


class CachingNarrator:
    """Reports cache figures the way a llama.cpp server does: the words this
    prompt shares as a prefix with the previous one were 'cached', the rest
    'processed'. Replies name the turn and a word count from the prompt, so
    prompts that differ give replies that differ."""

    model_id = "caching-test"

    def __init__(self, window: int = 8192, reply_words: int = 12):
        self.window, self.reply_words = window, reply_words
        self.last: list[str] = []
        self.calls = 0

    def context_window(self) -> Window:
        return Window(self.window, LOADED, detail="test narrator", reachable=True)

    def execute(self, prompt):
        words = _words(prompt)
        shared = 0
        for a, b in zip(self.last, words, strict=False):
            if a != b:
                break
            shared += 1
        self.last = words
        self.calls += 1
        reply = f"Beat {self.calls}: the prompt had {len(words)} words. " + "The tide turns. " * (self.reply_words // 3)
        yield Text(reply.strip())
        yield Usage(prompt_tokens=len(words), completion_tokens=len(reply.split()), cached_tokens=shared,
                    processed_tokens=len(words) - shared, prompt_ms=0.01 * (len(words) - shared), generation_ms=1.0)


class EchoNarrator(CachingNarrator):
    """Replies with the lines of the prompt that mention a marker word, so a test
    can see whether a section reached the narrator."""

    model_id = "echo-test"

    def __init__(self, marker: str = "lighthouse", **kw):
        super().__init__(**kw)
        self.marker = marker

    def execute(self, prompt):
        text = prompt.system + "\n" + prompt.story
        hits = [line.strip() for line in text.splitlines() if self.marker in line.lower()]
        yield Text(f"Seen {len(hits)}: " + (" | ".join(hits)[:1000] if hits else "nothing of it."))
        yield Usage(prompt_tokens=len(text.split()), completion_tokens=5)
