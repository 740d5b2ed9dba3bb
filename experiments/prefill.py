"""An instrument around the embedded narrator: how much of each prompt
llama.cpp reused from its KV cache, and how long prompt processing took.

llama-cpp-python keeps the tokens of the last prompt and reply, and on the
next call evaluates only what follows their longest common prefix. The
narrator's worker process reads that prefix off the model and reports it in
`Usage.cached_tokens`; this wrapper adds the time to the first word.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.providers import Text, Usage

__all__ = ["PrefillTimer", "Measurement"]


@dataclass
class Measurement:
    prompt_tokens: int
    reused_tokens: int
    prefill_s: float
    total_s: float


@dataclass
class PrefillTimer:
    inner: object
    measurements: list[Measurement] = field(default_factory=list)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def context_window(self):
        return self.inner.context_window()

    def peek_window(self):
        return self.inner.peek_window()

    def execute(self, prompt):
        start = time.perf_counter()
        first = None
        for chunk in self.inner.execute(prompt):
            if isinstance(chunk, Text):
                first = first or time.perf_counter()
            if isinstance(chunk, Usage):
                self.measurements.append(Measurement(
                    chunk.prompt_tokens or 0, chunk.cached_tokens or 0,
                    (first or time.perf_counter()) - start, time.perf_counter() - start))
            yield chunk
