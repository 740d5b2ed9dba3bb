"""An instrument around the embedded narrator: how much of each prompt
llama.cpp reused from its KV cache, and how long prompt processing took.

llama-cpp-python keeps the tokens of the last prompt and reply, and on the
next call evaluates only what follows their longest common prefix; so the
reused count is exactly that common prefix, read off the model before and
after the call.
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


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
        llama = self.inner.llama
        before = list(llama.input_ids[: llama.n_tokens])
        start = time.perf_counter()
        first = None
        produced = 0
        for chunk in self.inner.execute(prompt):
            if isinstance(chunk, Text):
                produced += 1
                first = first or time.perf_counter()
            if isinstance(chunk, Usage):
                after = list(llama.input_ids[: llama.n_tokens])
                prompt_ids = after[: max(0, len(after) - produced)]
                self.measurements.append(Measurement(
                    len(prompt_ids), min(_common_prefix(before, prompt_ids), len(prompt_ids)),
                    (first or time.perf_counter()) - start, time.perf_counter() - start))
            yield chunk
