"""An instrument around the embedded narrator: how much of each prompt
llama.cpp reused from its KV cache, and how long prompt processing took.

llama-cpp-python keeps the tokens of the last prompt and reply, and on the
next call evaluates only what follows their longest common prefix. The
narrator's worker process reads that prefix off the model and reports it in
`Usage.cached_tokens`; this wrapper adds the time to the first word.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from engine.providers import Text, Usage

__all__ = ["Measurement", "PrefillTimer", "floor_step"]


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


# ------------------------------------------------------------ a floor step, timed
def floor_step(*, model_path: str | None = None, n_ctx: int = 4096, nodes: int = 20, drop: int = 5,
               repeats: int = 3, max_tokens: int = 16, progress: bool = True):
    """Time to the first word at a history floor step, with chunk reuse on and
    off, on the embedded narrator (`model_path`: any GGUF; default the bundled).

    The story is `nodes` narrator-length passages; the turn before the step
    reads them all, the step drops the oldest `drop` (a quarter of 20: trim
    fraction 4) and adds one. Each timed turn starts from the same cache, so
    the two settings differ only in what they do with the kept history.
    Returns one row per timed turn: the worker's token counts (deterministic)
    and the times (the machine's load moves them)."""
    import pandas as pd
    from tqdm.auto import tqdm

    from engine.providers import Prompt
    from engine.providers.embedded import LocalNarrator

    from .compare import PASSAGES

    story = [f"{PASSAGES[i % len(PASSAGES)]} (Scene {i + 10}.)" for i in range(nodes + 1)]
    system = "You are the narrator of an interactive story. Write in the second person, present tense."
    narrator = LocalNarrator(n_ctx=n_ctx, model_path=model_path, seed=1)
    timer = PrefillTimer(narrator)
    rows = []
    for _ in tqdm(range(repeats), desc="floor step", disable=not progress):
        for reuse in (True, False):
            narrator.cache_reuse = reuse
            list(narrator.execute(Prompt(system, "\n\n".join(story[:nodes]) + "\n\n> You wait.", max_tokens=4,
                                         temperature=0.0)))  # the turn before the step: all of it read
            list(timer.execute(Prompt(system, "\n\n".join(story[drop:]) + "\n\n> You look around.",
                                      max_tokens=max_tokens, temperature=0.0)))
            usage, measured = narrator.last_usage, timer.measurements[-1]
            rows.append({"model": narrator.path.name, "cache_reuse": reuse, "prompt_tokens": usage["prompt_tokens"],
                         "cached_tokens": usage["cached_tokens"], "moved_tokens": usage["moved_tokens"],
                         "processed_tokens": usage["processed_tokens"],
                         "ttft_ms": round(measured.prefill_s * 1000, 1), "threads": narrator.worker.spec.threads,
                         "load_average": round(os.getloadavg()[0], 2)})
    return pd.DataFrame(rows)


def _main(argv: list[str] | None = None) -> None:
    """`python -m experiments.prefill --model PATH`: time to the first word at a
    floor step, chunk reuse on against off (medians over --repeats)."""
    import argparse

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--model", default=None, help="a GGUF file (default: the bundled SmolLM2)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--drop", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    frame = floor_step(model_path=args.model, n_ctx=args.n_ctx, nodes=args.nodes, drop=args.drop,
                       repeats=args.repeats)
    print(frame.groupby("cache_reuse")[["prompt_tokens", "moved_tokens", "processed_tokens", "ttft_ms", "load_average"]]
          .median().to_string())


if __name__ == "__main__":
    _main()
