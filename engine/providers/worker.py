"""The embedded model's own process.

llama.cpp is native code: a build that uses an instruction the CPU (or its
sandbox) does not allow dies with a signal, and in-process that signal takes
the notebook kernel and every open campaign with it (an AMX kernel once
killed pytest, papermill and the play notebook). So the model lives in a
child process that owns one `Llama` and its KV cache for as long as the
workbench runs. The parent sees a crash as a closed pipe and says so; the
next request starts a new child.

The child is this file run as a script by path (`python worker.py FD SPEC`),
not a `multiprocessing` spawn: spawn re-imports the parent's `__main__`, which
re-runs a user's unguarded script and cannot work from stdin. It imports only
the standard library, llama_cpp and numpy, so it starts in ~0.3 s.

The protocol is pickled tuples over a socket pair (`multiprocessing`'s
`Connection` framing). Requests:
("generate", spec), ("embed", texts), ("smoke",), ("stop",) while a generation
runs. A generate spec may carry "cache_reuse" (the shortest cached chunk worth
moving; 0 matches prefixes only), "slot" ("story" or a derived task's),
"opening" (the reply's first words, written on from), "steer" with
"steer_bias" (words whose tokens are favoured until the reply writes one)
and "dry_multiplier" (the DRY repetition sampler, shown the prompt; 0: off).
Replies: ("status", text), ("text", piece), ("reasoning", piece), ("usage",
dict: a server's prompt/cached/processed counts, plus moved_tokens and
slot_ms), ("done",), ("vectors", list), ("error", kind, message).
Sending a message per token costs ~20 µs against ~14 ms per token of SmolLM2
on 2 cores, so streaming through the pipe is free in practice.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection

__all__ = ["REUSE_CHUNK", "STORY_SLOT", "ModelLoadFailed", "ModelSpec", "Slots", "WorkerCrashed", "WorkerHandle",
           "apply_reuse", "plan_reuse", "serve"]

# A worker that has not finished a stopped generation within this long is
# killed and restarted rather than waited for (prompt processing of 8k tokens
# on SmolLM2 takes ~6 s here; a larger model can take longer, which is fine:
# killing it only costs the next turn a model load).
STOP_GRACE_SECONDS = 10.0

# The shortest run of cached tokens that is moved to its new place rather
# than read again; llama-server's `--cache-reuse N`. The run that matters is
# the last reply: it was generated after the previous prompt's tail and now
# follows the input in the history. With memories held in place and 64-token
# replies cut at a sentence (~40 tokens), plan_reuse on SmolLM2's tokenizer
# over the shipped campaign's 45 turns at 2,048 (scratch harness, replies
# cut from its passages) reads a median 114 tokens a turn on even turns at
# 8-32, 125 at 48 and 165 at 64, which misses every reply; odd turns (held
# out) 135 at 8-32, 143 at 48, 169 at 64. 32 is the largest that reads no
# more than the best; a longer run is less likely a chance repeat. (Before
# memories were held and replies were cut this short, 8-64 were equal.)
REUSE_CHUNK = 32
# The story's requests; every other slot name is derived work (memory, summary).
STORY_SLOT = "story"
# Sampling settings a request may carry beyond temperature and repeat penalty,
# passed to llama.cpp as given (absent or None: llama-cpp-python's own default).
SAMPLING_FIELDS = ("min_p", "top_p", "top_k", "presence_penalty", "frequency_penalty")


class WorkerCrashed(Exception):
    """The model's process died (a signal, or an exit without a reply)."""


class ModelLoadFailed(Exception):
    """The child started but llama.cpp could not load the file."""


THREADS_ENV = "STORY_WORKBENCH_THREADS"


def default_threads() -> int:
    """Cores not already busy (the one-minute load average), at least 1, at most 8.

    llama.cpp's threads meet at a spin barrier after every layer, so each
    thread needs a core of its own: on 2 cores with other work running,
    SmolLM2 took 51.9 s for a 48-token reply on 2 threads and 5.0 s on 1
    (measured here), and an idle machine gets every core. `STORY_WORKBENCH_THREADS`
    overrides the choice."""
    chosen = os.environ.get(THREADS_ENV, "").strip()
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    try:
        busy = round(os.getloadavg()[0])
    except OSError:  # no load average on this system
        busy = 0
    return max(1, min(cores - busy, 8))


@dataclass(frozen=True)
class ModelSpec:
    path: str
    n_ctx: int
    embedding: bool = False
    threads: int = field(default_factory=default_threads)
    seed: int = 1234


# ------------------------------------------------------------------ child side
def serve(conn, spec: ModelSpec) -> None:  # pragma: no cover - runs in the child; tested through the handle
    """The child's loop: load once, answer requests until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the notebook is the parent's business
    try:
        llama = _load(spec)
    except Exception as exc:  # noqa: BLE001 - reported to the parent in words
        conn.send(("error", "load", f"{type(exc).__name__}: {exc}"))
        return
    import llama_cpp

    conn.send(("ready", {"n_ctx": llama.n_ctx(), "template": bool(llama.metadata.get("tokenizer.chat_template")),
                         "can_shift": can_shift(llama),
                         "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace")}))
    slots = Slots()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if request[0] == "generate":
                _generate(conn, llama, request[1], slots)
            elif request[0] == "smoke":
                slots.enter(llama, "smoke")
                out = llama.create_completion("Once upon a time", max_tokens=1, temperature=0.0)
                conn.send(("smoked", out["choices"][0]["text"]))
            elif request[0] == "embed":
                conn.send(("vectors", [llama.embed(t, truncate=True) for t in request[1]]))
            # a "stop" that arrives after its generation ended is simply dropped
        except ValueError as exc:  # llama-cpp-python's words for an over-long prompt
            conn.send(("error", "prompt", str(exc)))
        except Exception as exc:  # noqa: BLE001
            conn.send(("error", "model", f"{type(exc).__name__}: {exc}"))


def _load(spec: ModelSpec):
    # Both counts: llama-cpp-python's prompt threads default to every core,
    # which put a busy machine's prompt reading back on the spin barrier.
    options = dict(model_path=spec.path, n_ctx=spec.n_ctx, n_threads=spec.threads, n_threads_batch=spec.threads,
                   verbose=False, seed=spec.seed)
    if spec.embedding:
        import llama_cpp

        options.update(embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
        return llama_cpp.Llama(**options)
    return reusing_llama_class()(**options)


def _common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# ------------------------------------------------------------ moving cached chunks
def plan_reuse(cached, prompt, min_chunk: int) -> tuple[int, list[tuple[int, int, int]]]:
    """Which cached tokens the new prompt can keep: llama-server's `--cache-reuse` walk.

    After the common prefix, the cache is searched, in order, for a run of at
    least `min_chunk` tokens equal to what the prompt needs next; that run is
    moved to its new position and the walk goes on after it. The walk stops at
    the first prompt token no cached run continues (new content), so what is
    kept is always a contiguous start of the prompt, which is what
    llama-cpp-python evaluates after. Returns the kept length and the moves
    (cache position, prompt position, length). With `min_chunk` 0 only the
    prefix is kept."""
    import numpy as np

    cached, prompt = np.asarray(cached, dtype=np.int64), np.asarray(prompt, dtype=np.int64)
    head_p = head_c = _common_prefix(cached.tolist(), prompt.tolist())
    moves: list[tuple[int, int, int]] = []
    if min_chunk <= 0:
        return head_p, moves
    while head_c < len(cached) and head_p < len(prompt):
        found = None
        for c in head_c + np.flatnonzero(cached[head_c:] == prompt[head_p]):
            span = min(len(cached) - c, len(prompt) - head_p)
            if span < min_chunk:
                break  # later candidates are shorter still
            differ = np.flatnonzero(cached[c:c + span] != prompt[head_p:head_p + span])
            n = int(differ[0]) if len(differ) else span
            if n >= min_chunk:
                found = (int(c), n)
                break
        if found is None:
            break
        c, n = found
        moves.append((c, head_p, n))
        head_c, head_p = c + n, head_p + n
    return head_p, moves


def can_shift(llama) -> bool:
    """Whether this model's memory can move cells (not a recurrent model, not M-RoPE)."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(llama.ctx)
    return bool(memory) and bool(llama_cpp.llama_memory_can_shift(memory))


def apply_reuse(llama, prompt, min_chunk: int) -> tuple[int, int]:
    """Moves the cached chunks `plan_reuse` finds into place in `llama`'s KV
    cache and token record, so llama-cpp-python's own prefix match keeps them
    and evaluates only the rest. Returns (tokens kept, of which moved).

    Each move drops the cells between the chunk's old and new positions and
    shifts the chunk down (llama_memory_seq_rm, then llama_memory_seq_add: the
    keys are re-rotated to their new positions at the next decode), as
    llama-server does. Sequence 0 is the one llama-cpp-python decodes into."""
    import llama_cpp

    cached = llama.input_ids[: llama.n_tokens]
    if min_chunk > 0 and not can_shift(llama):
        min_chunk = 0
    kept, moves = plan_reuse(cached, prompt, min_chunk)
    if not moves:
        return kept, 0
    memory = llama_cpp.llama_get_memory(llama.ctx)
    for at, to, n in moves:
        llama_cpp.llama_memory_seq_rm(memory, 0, to, at)
        llama_cpp.llama_memory_seq_add(memory, 0, at, at + n, to - at)
    llama.input_ids[:kept] = prompt[:kept]
    llama.n_tokens = kept
    # The logits in hand belong to the old last token: even a prompt kept whole
    # must decode its last token again before sampling.
    llama._requires_eval = True
    return kept, sum(n for _, _, n in moves)


def reusing_llama_class():
    """`llama_cpp.Llama` that moves cached chunks before each generation.

    `generate` receives the exact prompt tokens after the chat template, so
    this is the one place to rearrange the cache before llama-cpp-python
    compares it with the prompt. `reuse_chunk` is set per request (0: prefix
    only); `last_reuse` is (prompt tokens, kept from cache, moved)."""
    import llama_cpp

    class ReusingLlama(llama_cpp.Llama):
        reuse_chunk = 0
        last_reuse = (0, 0, 0)
        dry: dict | None = None  # set per request: with_dry's settings, None for none
        _prompt: list[int] = []

        def generate(self, tokens, *args, **kwargs):
            tokens = list(tokens)
            if kwargs.get("reset", True) and self.n_tokens > 0:
                kept, moved = apply_reuse(self, tokens, self.reuse_chunk)
            else:
                kept, moved = 0, 0
            self.last_reuse = (len(tokens), kept, moved)
            self._prompt = tokens
            return super().generate(tokens, *args, **kwargs)

        def _init_sampler(self, *args, **kwargs):
            sampler = super()._init_sampler(*args, **kwargs)
            if self.dry:
                with_dry(self, sampler, self._prompt, **self.dry)
            return sampler

    return ReusingLlama


# llama.cpp's DRY sampler ("don't repeat yourself": p-e-w's design, from
# KoboldCpp): a token that would extend a run of tokens already written
# earlier is penalised by multiplier * base ** (run - allowed_length), so a
# name may recur and a copied sentence may not. Base, allowed length and the
# breakers (a run never crosses them) are the published defaults of
# llama.cpp, KoboldCpp and SillyTavern, with the state protocol's fence and
# braces added: its block is copied from the rule on purpose, and a tuning
# reply under DRY wrote the fence as "```stateblock:", which no parser reads.
# The multiplier is the embedded narrator's (embedded.DRY_MULTIPLIER).
DRY_BASE = 1.75
DRY_ALLOWED_LENGTH = 2
DRY_BREAKERS = ("\n", ":", '"', "*", "`", "{", "}")


def with_dry(llama, sampler, prompt: list[int], multiplier: float, last_n: int) -> None:
    """Put a DRY sampler into llama-cpp-python's chain, straight after its
    repeat penalty (before top-k and the draw), and show it the prompt.

    Why the prompt: a sampler chain only sees the tokens it drew, so
    llama-cpp-python's repeat penalty covers the reply alone and a reply
    copying the story shown is never penalised; the copies the narration
    evaluation counted were of earlier replies in the prompt."""
    import llama_cpp

    chain = sampler.sampler
    # A Python logits processor's sampler has no name function: never asked.
    custom = {i for i, _ in sampler.custom_samplers}
    names = [b"" if i in custom else llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i))
             for i in range(llama_cpp.llama_sampler_chain_n(chain))]
    # "?penalties" when the penalty does nothing (llama.cpp marks a no-op so)
    after = next(i for i, name in enumerate(names) if name.endswith(b"penalties")) + 1
    tail = [llama_cpp.llama_sampler_chain_remove(chain, after) for _ in range(after, len(names))]
    breakers = (ctypes.c_char_p * len(DRY_BREAKERS))(*(b.encode() for b in DRY_BREAKERS))
    dry = llama_cpp.llama_sampler_init_dry(llama._model.vocab, multiplier, DRY_BASE, DRY_ALLOWED_LENGTH, last_n,
                                           breakers, len(DRY_BREAKERS))
    for token in prompt[-last_n:]:
        llama_cpp.llama_sampler_accept(dry, token)
    for piece in (dry, *tail):
        llama_cpp.llama_sampler_chain_add(chain, piece)


# ------------------------------------------------------------ the story's cache
class Slots:
    """The story's KV cache, set aside while derived work uses the model.

    A memory or summary request has its own system block, so it shares ~4
    tokens with the story: run on the story's cache it replaced it, and the
    next turn read its whole prompt again (16 of 39 turns in the issue's run).
    Before a derived request the story's sequence is copied out
    (llama_state_seq_get_data) with its tokens; the next story request copies
    it back. Only the story is kept: derived requests are short and rarely
    share more than their instructions. Copying SmolLM2's 944- and 1,842-token
    story out took 38 and 62 ms, back in 19 ms (measured here, loaded
    machine), against seconds to read it again."""

    def __init__(self):
        self.live = STORY_SLOT
        self.saved: tuple | None = None  # (tokens, state buffer, its size) while derived work runs
        self.last_ms = 0.0  # the time the last switch took

    def enter(self, llama, slot: str) -> None:
        started = time.perf_counter()
        if slot == self.live:
            self.last_ms = 0.0
            return
        if self.live == STORY_SLOT:
            self.saved = _save_sequence(llama) if llama.n_tokens else None
        elif slot == STORY_SLOT and self.saved is not None:
            _restore_sequence(llama, *self.saved)
            self.saved = None
        self.live = slot
        self.last_ms = (time.perf_counter() - started) * 1000


def _save_sequence(llama) -> tuple:
    import llama_cpp

    size = llama_cpp.llama_state_seq_get_size(llama.ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(llama.ctx, buffer, size, 0)
    return llama.input_ids[: llama.n_tokens].copy(), buffer, written


def _restore_sequence(llama, tokens, buffer, size) -> None:
    """The story's cells and tokens back in place; on failure the cache starts
    empty (the turn reads its whole prompt, as it did before slots)."""
    import llama_cpp

    memory = llama_cpp.llama_get_memory(llama.ctx)
    llama_cpp.llama_memory_seq_rm(memory, 0, -1, -1)
    if size and llama_cpp.llama_state_seq_set_data(llama.ctx, buffer, size, 0):
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
    else:
        llama.n_tokens = 0
    # The restored cells carry no logits: llama-cpp-python must decode at least one token.
    llama._requires_eval = True


def opened_prompt(llama, messages: list[dict], opening: str):
    """The prompt's tokens with the reply already begun: the model's own chat
    template rendered as llama-cpp-python's chat handler renders it (the same
    tokens, so the story's cache is reused), then `opening` after the reply's
    header, for the model to write on from. None without an opening or a
    template (the chat completion runs as before).

    The opening is tokenized without special tokens: it is the player's text,
    and a typed "<|im_end|>" must stay text, not end the reply's turn."""
    template = llama.metadata.get("tokenizer.chat_template") if opening else None
    if not template:
        return None
    rendered = _formatter(llama, template)(messages=messages)
    head = llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)
    return head + llama.tokenize(opening.encode("utf-8"), add_bos=False, special=False), rendered.stop, \
        rendered.stopping_criteria


def _formatter(llama, template: str):
    """The model's chat-template renderer, compiled once per loaded model (a
    Jinja template compiles in milliseconds, on every opened turn otherwise)."""
    held = getattr(llama, "_opening_formatter", None)
    if held is None or held[0] != template:
        from llama_cpp import llama_chat_format

        eos, bos = llama.token_eos(), llama.token_bos()
        held = (template, llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
            bos_token=llama._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos]))
        llama._opening_formatter = held
    return held[1]


# After an opening the reply's end-of-turn token is barred for this many
# tokens: "You light the lantern." reads as a whole reply, and the 135M model
# sometimes ended its turn right there (an empty reply, asked again or failed).
OPENING_MIN_TOKENS = 8


def _no_end_before(llama):
    """A logits processor that keeps the model from ending its turn within
    OPENING_MIN_TOKENS of the prompt's end."""
    import numpy as np

    ends = [t for t in {llama.token_eos(), *_im_end(llama)} if t is not None and t >= 0]
    start: list[int] = []

    def processor(input_ids, scores):
        start or start.append(len(input_ids))  # the first call sees the prompt alone
        if len(input_ids) < start[0] + OPENING_MIN_TOKENS:
            scores[ends] = -np.inf
        return scores

    return processor


def steer_sequences(llama, words) -> list[tuple[bool, list[int]]]:
    """(after a space?, tokens) for each word as it would stand in running
    text and at a line's start, lower-case and capitalised. A spelling whose
    first token is a scrap of one or two letters (" o" of " oar", "D" of
    "Dock") is left out: favouring " o" favours every word it begins, and the
    tuning replies steered so read "DdDockdocks"."""
    found = []
    for word in words:
        for form in dict.fromkeys((word.lower(), word[:1].upper() + word[1:].lower())):
            for spaced in (True, False):
                tokens = llama.tokenize(((" " if spaced else "") + form).encode("utf-8"), add_bos=False,
                                        special=False)
                first = llama.detokenize(tokens[:1]).decode("utf-8", "ignore").strip()
                if tokens and (len(tokens) == 1 or len(first) >= STEER_MIN_PIECE) and (spaced, tokens) not in found:
                    found.append((spaced, tokens))
    return found


# The shortest first piece of a steered spelling (see steer_sequences).
STEER_MIN_PIECE = 3


def _steered(llama, words, bias: float, opened: bool):
    """A logits processor that adds `bias` to the first token of each steered
    word until the reply has named one of them, and, once a word's first
    tokens are written, favours its next token by STEER_FINISH (a nudged
    " lan" becomes " lantern", not " land"). A spelling without a space is
    favoured only where a line begins. The reply's words are read as text, so
    a word the model spells with other tokens still counts."""
    import re

    sequences = steer_sequences(llama, words)
    said = re.compile(r"(?i)\b(?:" + "|".join(re.escape(w) for w in words) + ")")
    start: list[int] = []
    done = [False]
    reply = bytearray()  # the reply so far, grown by each new token (not re-read whole)
    longest = max((len(seq) for _, seq in sequences), default=1)

    def processor(input_ids, scores):
        start or start.append(len(input_ids))
        if done[0] or not sequences:
            return scores
        # Only a word's first tokens are ever compared: the reply's last few.
        written = [int(t) for t in input_ids[max(start[0], len(input_ids) - longest):]]
        if written:
            reply.extend(llama.detokenize(written[-1:]))
        text = reply.decode("utf-8", "ignore")
        if said.search(text):
            done[0] = True
            return scores
        line_start = text[-1:] in ("\n", '"', "(", "[") if text else not opened
        for spaced, seq in sequences:
            step = next((k for k in range(len(seq) - 1, 0, -1) if written[-k:] == seq[:k]), 0)
            if step:
                scores[seq[step]] += STEER_FINISH
            elif spaced or line_start:
                scores[seq[0]] += bias
        return scores

    return processor


# Once a steered word's first tokens are written, its next token is favoured
# by this much: enough to finish the word the bias began.
STEER_FINISH = 10.0


def _processors(llama, spec: dict, opened: bool):
    """The request's logits processors: the end-of-turn bar after an opening,
    the steer towards the input's named things (spec "steer", "steer_bias")."""
    import llama_cpp

    found = [_no_end_before(llama)] if opened else []
    words = [w for w in spec.get("steer") or () if w and w.strip()]
    if words and spec.get("steer_bias"):
        found.append(_steered(llama, words, float(spec["steer_bias"]), opened))
    return llama_cpp.LogitsProcessorList(found) if found else None


def _im_end(llama) -> list[int]:
    """The chat template's end-of-turn token when it is one token of its own."""
    found = llama.tokenize(b"<|im_end|>", add_bos=False, special=True)
    return found if len(found) == 1 else []


def _generate(conn, llama, spec: dict, slots: Slots | None = None) -> None:
    """Stream one chat completion. The KV cache of the previous prompt stays in
    `llama`; chunks of it the new prompt repeats are moved into place and only
    the rest is evaluated. The cache figures reported are exactly that:
    cached = kept (prefix and moved chunks), processed = evaluated."""
    if slots is not None:
        slots.enter(llama, spec.get("slot", STORY_SLOT))
    llama.reuse_chunk = int(spec.get("cache_reuse", 0))
    messages = spec["messages"]
    # The model's own count of the texts (no chat template): the parent sets it
    # against its cl100k estimate of the same texts to learn the model's ratio.
    estimate = len(llama.tokenize("\n".join(m["content"] for m in messages).encode("utf-8", "replace")))
    conn.send(("status", f"Reading {estimate:,} prompt tokens…"))
    started = time.perf_counter()
    first = None
    produced = 0
    sampling = {"max_tokens": spec["max_tokens"], "temperature": spec["temperature"],
                "repeat_penalty": spec["repeat_penalty"], "stream": True, "seed": spec.get("seed"),
                **{k: spec[k] for k in SAMPLING_FIELDS if spec.get(k) is not None}}
    stops = [s for s in spec.get("stop") or () if isinstance(s, str) and s]  # the reader's stop strings
    dry = float(spec.get("dry_multiplier") or 0.0)
    llama.dry = {"multiplier": dry, "last_n": llama.n_ctx()} if dry > 0 else None
    opened = opened_prompt(llama, messages, spec.get("opening") or "")
    processors = _processors(llama, spec, opened is not None)
    if opened is None:
        stream = llama.create_chat_completion(messages=messages, logits_processor=processors, stop=stops or None,
                                              **sampling)
    else:
        tokens, stop, stopping = opened
        stop = [*([stop] if isinstance(stop, str) else stop or []), *stops]
        stream = llama.create_completion(tokens, stop=stop or None, stopping_criteria=stopping,
                                         logits_processor=processors, **sampling)
    stopped = False
    for chunk in stream:
        if first is None:
            first = time.perf_counter()
        choice = chunk["choices"][0]
        delta = choice.get("delta") or {"content": choice.get("text")}
        if delta.get("reasoning_content"):
            conn.send(("reasoning", delta["reasoning_content"]))
        if delta.get("content"):
            produced += 1
            conn.send(("text", delta["content"]))
        if conn.poll() and conn.recv()[0] == "stop":
            stopped = True
            break
    ended = time.perf_counter()
    # Plain ints: the reuse counts can be numpy integers, which no JSON record can hold.
    prompt_n, kept, moved = (int(n) for n in llama.last_reuse)
    # llama-cpp-python reads the last prompt token again when all of it was kept.
    cached = min(kept, max(prompt_n - 1, 0))
    first = first or ended
    conn.send(("usage", {
        "prompt_tokens": prompt_n, "completion_tokens": produced, "cached_tokens": cached,
        "processed_tokens": prompt_n - cached, "moved_tokens": moved,
        "prompt_ms": round((first - started) * 1000, 2), "generation_ms": round((ended - first) * 1000, 2),
        "slot_ms": round(slots.last_ms, 2) if slots is not None else 0.0,
        "stopped": stopped, "counted": estimate,
    }))
    conn.send(("done",))


# ----------------------------------------------------------------- parent side
class WorkerHandle:
    """One model in one child process, started on first use and again after a
    crash. One request at a time: a llama context cannot serve two."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self._process = None
        self._conn = None
        self._info: dict = {}
        self._lock = threading.Lock()
        self._dirty = False  # a generation was abandoned and its "done" not yet read

    # -- lifecycle
    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def info(self) -> dict:
        return dict(self._info)

    def _start(self) -> None:
        # A new process, never a fork: forking a Jupyter kernel copies its
        # threads' locks in whatever state they are in.
        mine, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno()), json.dumps(asdict(self.spec))],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True,
            )
        finally:
            theirs.close()
        self._process, self._conn, self._dirty = process, Connection(mine.detach()), False
        reply = self._recv()
        if reply[0] == "error":
            self.close()
            raise ModelLoadFailed(reply[2])
        self._info = reply[1]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._process = self._conn = None
        self._dirty = False

    def kill(self) -> None:
        """Kill the child as a crash would (tests, and a stuck generation)."""
        if self.alive:
            os.kill(self._process.pid, signal.SIGKILL)

    def _death(self) -> str:
        process = self._process
        if process is not None:
            try:
                code = process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None and code < 0:
                try:
                    return f"it was killed by {signal.Signals(-code).name}"
                except ValueError:
                    return f"it was killed by signal {-code}"
            if code is not None:
                return f"it exited with code {code}"
        return "its process ended without a reply"

    def _recv(self, timeout: float | None = None):
        try:
            if timeout is not None and not self._conn.poll(timeout):
                return None
            return self._conn.recv()
        except (EOFError, OSError, ConnectionError) as exc:
            why = self._death()
            self.close()
            raise WorkerCrashed(why) from exc

    def _ready(self, on_status=None) -> None:
        if self._dirty and self._conn is not None:
            self._drain()
        if not self.alive:
            self.close()
            if on_status:
                on_status(f"Loading the model {os.path.basename(self.spec.path)}…")
            self._start()

    def _drain(self) -> None:
        """Read what a stopped generation still sends, up to its "done"."""
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        try:
            while time.monotonic() < deadline:
                reply = self._recv(timeout=0.2)
                if reply is not None and reply[0] in ("done", "error"):
                    self._dirty = False
                    return
        except WorkerCrashed:
            pass
        self.kill()
        self.close()

    # -- requests
    def request(self, message: tuple, expect: str, timeout: float | None = None):
        with self._lock:
            self._ready()
            self._conn.send(message)
            while True:
                reply = self._recv(timeout)
                if reply is None:
                    self.kill()
                    self.close()
                    raise WorkerCrashed(f"it did not answer within {timeout:.0f} s")
                if reply[0] == expect:
                    return reply[1]
                if reply[0] == "error":
                    raise RuntimeError(reply[2])

    def stream(self, spec: dict, tick: float = 1.0) -> Iterator[tuple]:
        """Yields the child's replies up to "done". While the child is silent
        (prompt processing) a ("wait", seconds) tuple comes every `tick`, so the
        caller can show progress and honour Stop within a second. Closing the
        iterator early asks the child to stop; its tail is read before the
        next request."""
        with self._lock:
            if not self.alive:
                yield ("status", f"Loading the model {os.path.basename(self.spec.path)}…")
            self._ready()
            self._conn.send(("generate", spec))
            self._dirty = True
            started = time.monotonic()
            try:
                while True:
                    reply = self._recv(timeout=tick)
                    if reply is None:
                        yield ("wait", time.monotonic() - started)
                        continue
                    if reply[0] in ("done", "error"):
                        self._dirty = False
                        yield reply
                        return
                    yield reply
            except GeneratorExit:
                if self._dirty and self._conn is not None:
                    try:
                        self._conn.send(("stop",))
                    except OSError:
                        pass
                raise


if __name__ == "__main__":  # the child: python worker.py FD SPEC_JSON
    serve(Connection(int(sys.argv[1])), ModelSpec(**json.loads(sys.argv[2])))
