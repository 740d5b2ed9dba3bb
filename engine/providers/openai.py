"""A narrator behind any OpenAI-compatible endpoint: Ollama, llama.cpp's
server, vLLM, LM Studio. One small class; the httpx client is its only I/O.

The reply is read in a helper thread, so the turn hears from the narrator
at least twice a second even while the server is silent (Stop works at
once), and every reply is bounded: in tokens (the reply cap plus a margin),
in wall-clock time, in line length and in bytes.
"""
from __future__ import annotations

import json
import math
import queue
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

from ..budget import tokens
from ..budget.ratios import MAX_RATIO, MIN_RATIO, TokenRatios, next_ratio
from ..errors import NarratorError
from . import window as windows
from .base import CONTINUE_HINT, Chunk, Prompt, Reasoning, Status, Text, Usage
from .endpoints import EndpointRefused
from .http import PROBE_BODY, ResponseRefused, bounded_timeout, make_client, read_json

__all__ = ["CALIBRATION_TEXT", "HEARTBEAT", "MAX_LINE", "MAX_REASONING_TOKENS", "WALL_CLOCK_TIMEOUTS", "OpenAINarrator",
           "friendly_error", "reply_limit", "server_message"]

# Servers name the thinking stream differently: DeepSeek/vLLM
# `reasoning_content`, Ollama and OpenRouter `reasoning`, some `thinking`.
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}
# How long the turn may go without hearing from the narrator: Stop must take
# effect within a second while a server reads a long prompt in silence.
HEARTBEAT = 0.5
# One SSE line is one token's JSON, a few hundred bytes (llama.cpp's final
# line with timings is under 2 KB). A 256 MB line without a newline cost
# +810 MB before this bound.
MAX_LINE = 1024 * 1024
# Reasoning a thinking model may stream before the reply: the turn keeps at
# most max_reasoning_tokens (4,096 by default) of it; past twice that the
# server is not going to stop by itself.
MAX_REASONING_TOKENS = 8192
# The wall-clock cap on one reply is this many read timeouts: the read timeout
# bounds one silence, this bounds a server that drips forever.
WALL_CLOCK_TIMEOUTS = 4
# A calibration passage for the tokenizer ratio before any prompt has been
# sent: ordinary narrative prose with dialogue, names and punctuation, which
# is what the prompt is made of. Our own words.
CALIBRATION_TEXT = (
    "The harbour bell had not rung for three days. You walk the length of the quay, past nets left "
    "to dry and crates stencilled with the marks of far-off ports, until the lamplighter steps out "
    "of a doorway and blocks your way. \"They sealed the gate at dusk,\" she says, turning the key "
    "ring over in her fingers. \"Nobody leaves Westhaven now, not the fishermen, not the priests, "
    "and not you.\" Behind her the chapel windows flicker: someone is moving candles, one by one, "
    "as if counting. Rain begins again, thin and cold, running in the gutters toward the sea. "
    "Aldric's letter is still folded inside your coat; its wax seal has cracked along the crest. "
    "[Story direction from the player: make the storm break before midnight.] You ask who gave "
    "the order. She laughs once, without humour, and points at the tower: 27 steps, 3 locks, 1 door."
)

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTEXT_WORDS = re.compile(r"context|too long|exceed|maximum .*length|n_ctx|max_model_len|num_ctx", re.I)


def reply_limit(max_tokens: int) -> int:
    """Our tokens read before a stream is cut: twice the cap plus 64. Pieces
    arrive one server token at a time and each is counted alone, which
    doubles some ("word " is two cl100k tokens, one of SmolLM2's); a server
    that honours max_tokens never comes near this, an endless one is cut."""
    return 2 * max_tokens + 64


def _clean(text: str) -> str:
    """A lone surrogate cannot be stored (UTF-8 refuses it): it becomes the
    visible replacement character, the way a browser shows a broken byte."""
    return _SURROGATE.sub("\N{REPLACEMENT CHARACTER}", text) if _SURROGATE.search(text) else text


def server_message(body: bytes | str | None) -> str:
    """The server's own words from an error body: llama.cpp and OpenAI
    `{"error": {"message"}}`, Ollama `{"error": "..."}`, vLLM
    `{"object": "error", "message"}`, FastAPI `{"detail"}`, or plain text."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    body = (body or "").strip()
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict):
            error = error.get("message") or error.get("type")
        found = error or parsed.get("message") or parsed.get("detail")
        if found:
            body = found if isinstance(found, str) else json.dumps(found)
    words = " ".join(re.sub(r"<[^>]{0,200}>", " ", _clean(body)).split())
    return words[:400] + ("…" if len(words) > 400 else "")


def _said(message: str) -> str:
    return f" The server said: “{message}”." if message else ""


def friendly_error(exc: Exception, base: str, model: str, timeout: float, message: str | None = None) -> NarratorError:
    """Words for a failure, with the server's own message where it sent one."""
    if isinstance(exc, EndpointRefused | ResponseRefused):
        return NarratorError(str(exc))
    if isinstance(exc, httpx.TimeoutException):
        return NarratorError(f"The endpoint {base} did not answer within {timeout:.0f} s. A large model may "
                             "still be loading: try again, or raise timeout_seconds.")
    if isinstance(exc, httpx.ConnectError):
        return NarratorError(f"Could not connect to {base}. Is the server running and listening there "
                             "(for Ollama: `ollama serve`)?")
    if isinstance(exc, httpx.HTTPStatusError):
        if message is None:
            try:
                message = server_message(exc.response.content)
            except httpx.ResponseNotRead:
                message = ""
        return _status_error(exc.response.status_code, message, base, model)
    return NarratorError(f"The endpoint connection failed ({type(exc).__name__}: {exc}).")


def _status_error(status: int, message: str, base: str, model: str) -> NarratorError:
    said = _said(message)
    advice = {
        400: "The server refused the request as malformed. Check api_mode (chat or completion) and the model.",
        401: f"The server refused the request as unauthorized. A local server normally needs no key: check that "
             f"{base} is the endpoint you meant.",
        403: f"The server refused the request. Check that {base} is the endpoint you meant.",
        404: f"Endpoint or model not found. Check the endpoint URL and that the model '{model}' exists on it "
             "(wb.test_connection() lists what it offers).",
        413: "The request was larger than the server accepts. Lower context_budget.",
        429: "The server is refusing further requests for now. Wait a moment and try again.",
        500: "The server failed while answering; its own log says more. Try again, or restart it.",
        503: "The server is not ready, most likely still loading the model. Wait a moment and try again.",
    }.get(status, "Try again; if it keeps failing, the server's own log says why.")
    return NarratorError(f"The endpoint returned HTTP {status}.{said} {advice}")


def _samplers(chosen: dict) -> dict:
    """The samplers the reader set, in the names servers read: top_p, min_p
    and stop as OpenAI's API and llama.cpp, vLLM and Ollama name them; the
    repetition penalty under llama.cpp's name (repeat_penalty) and vLLM's
    (repetition_penalty), since each ignores the other's. Nothing unset is sent."""
    out = {k: chosen[k] for k in ("top_p", "min_p", "stop") if k in chosen}
    if "repeat_penalty" in chosen:
        out["repeat_penalty"] = out["repetition_penalty"] = chosen["repeat_penalty"]
    return out


def _ms(value) -> float | None:
    return round(float(value), 3) if isinstance(value, int | float) and math.isfinite(value) and value >= 0 else None


def _count(value) -> int | None:
    return value if type(value) is int and value >= 0 else None


@dataclass
class _Tally:
    """The server's figures as they arrive; the last chunk that names one wins."""

    figures: dict = field(default_factory=dict)

    def add(self, payload: dict) -> None:
        f = self.figures
        usage = payload.get("usage")
        if isinstance(usage, dict):
            f["prompt_tokens"] = _count(usage.get("prompt_tokens"))
            f["completion_tokens"] = _count(usage.get("completion_tokens"))
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and _count(details.get("cached_tokens")) is not None:
                f["cached_tokens"] = details["cached_tokens"]
        timings = payload.get("timings")  # llama.cpp's server
        if isinstance(timings, dict):
            for ours, theirs in (("processed_tokens", "prompt_n"), ("cached_tokens", "cache_n")):
                if _count(timings.get(theirs)) is not None:
                    f[ours] = timings[theirs]
            f["prompt_ms"], f["generation_ms"] = _ms(timings.get("prompt_ms")), _ms(timings.get("predicted_ms"))
        if _count(payload.get("prompt_eval_count")) is not None:  # Ollama's native figures
            f["processed_tokens"] = payload["prompt_eval_count"]
        for ours, theirs in (("prompt_ms", "prompt_eval_duration"), ("generation_ms", "eval_duration")):
            if _ms(payload.get(theirs)) is not None:
                f[ours] = round(payload[theirs] / 1e6, 3)  # nanoseconds

    def usage(self) -> Usage:
        f = dict(self.figures)
        prompt, cached, processed = f.get("prompt_tokens"), f.get("cached_tokens"), f.get("processed_tokens")
        if processed is None and prompt is not None and cached is not None and cached <= prompt:
            f["processed_tokens"] = prompt - cached
        if cached is None and prompt is not None and processed is not None and processed <= prompt:
            f["cached_tokens"] = prompt - processed
        return Usage(**{k: f.get(k) for k in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                              "processed_tokens", "prompt_ms", "generation_ms")})


class _Reader:
    """Runs the request in a helper thread and hands lines over a small queue.

    The thread owns the connection; `abort` shuts its socket down, which is
    what makes a server stop generating and the thread end at once."""

    def __init__(self, client: httpx.Client, url: str, body: dict):
        self.queue: queue.Queue = queue.Queue(maxsize=64)
        self.stopping = threading.Event()
        self.sock: socket.socket | None = None
        self.thread = threading.Thread(target=self._run, args=(client, url, body), daemon=True,
                                       name="narrator-stream")
        self.thread.start()

    def _trace(self, event: str, info: dict) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            self.sock = stream.get_extra_info("socket") if stream is not None else None

    def _put(self, item) -> bool:
        while not self.stopping.is_set():
            try:
                self.queue.put(item, timeout=HEARTBEAT)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, client, url, body) -> None:
        try:
            # A connection of its own for every reply ("Connection: close"), so the socket is
            # known from the moment it opens and Stop can shut it even before the first byte.
            with client.stream("POST", url, json=body, headers={"Connection": "close"},
                               extensions={"trace": self._trace}) as response:
                if self.sock is None:
                    stream = response.extensions.get("network_stream")
                    self.sock = stream.get_extra_info("socket") if stream is not None else None
                if response.status_code >= 400:
                    detail = b"".join(_limited(response.iter_bytes(), PROBE_BODY // 64))
                    self._put(("status", (response.status_code, server_message(detail))))
                    return
                for line in _lines(response.iter_bytes()):
                    if not self._put(("line", line)):
                        return
            self._put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
            if not self.stopping.is_set():
                self._put(("error", exc))

    def get(self):
        return self.queue.get(timeout=HEARTBEAT)

    def abort(self) -> None:
        self.stopping.set()
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(timeout=0.3)


def _limited(pieces: Iterator[bytes], limit: int) -> Iterator[bytes]:
    total = 0
    for piece in pieces:
        yield piece[: max(0, limit - total)]
        total += len(piece)
        if total >= limit:
            return


def _lines(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Lines of an SSE stream, none longer than MAX_LINE. Only the new piece is
    searched for a newline, so a line dripped a byte at a time costs linear time."""
    partial: list[bytes] = []
    size = 0
    for piece in pieces:
        *complete, rest = piece.split(b"\n")
        if complete:
            complete[0] = b"".join(partial) + complete[0]
            partial, size = [], 0
            yield from complete
        if rest:
            partial.append(rest)
            size += len(rest)
        if size > MAX_LINE:
            raise ResponseRefused(f"The server sent a stream line longer than {MAX_LINE // 1024:,} KB; a model "
                                  "server sends a few hundred bytes per line, so reading stopped.")
    if partial:
        yield b"".join(partial)


class OpenAINarrator:
    def __init__(self, base_url: str, model: str, *, api_mode: str = "chat", timeout: float = 300.0,
                 client: httpx.Client | None = None, declared_window: int | None = None, db=None,
                 wall_clock: float | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_mode = api_mode
        self.timeout = bounded_timeout(timeout)
        self.declared_window = declared_window
        self.client = client or make_client(self.timeout)
        # Streams get their own pool when the client is ours: a stream never rides
        # a probe's idle connection, so its socket is always known (Stop).
        self.stream_client = client or make_client(self.timeout)
        self.wall_clock = wall_clock or WALL_CLOCK_TIMEOUTS * self.timeout
        self.model_id = model
        self.ratios = TokenRatios(db) if db is not None else None
        self._ratio: dict | None = None          # in force when there is no database
        self._can_tokenize: bool | None = None   # None: not asked yet
        self._window: windows.Window | None = None
        self._last_text = ""

    # ------------------------------------------------------------ the window
    @property
    def ratio_key(self) -> str:
        return f"{self.model} @ {windows.native_base(self.base_url)}"

    def context_window(self) -> windows.Window:
        window = windows.ensure_window(self.client, self.base_url, self.model,
                                       declared=self.declared_window, warm_timeout=self.timeout)
        self._window = window
        return self._corrected(window)

    def peek_window(self) -> windows.Window:
        """The window as far as the server can say without loading anything (dry runs)."""
        return self._corrected(windows.probe(self.client, self.base_url, self.model, declared=self.declared_window))

    def _stored_ratio(self) -> dict | None:
        return self.ratios.get(self.ratio_key) if self.ratios is not None else self._ratio

    def _observe(self, observed: float, source: str) -> None:
        if not math.isfinite(observed) or not 0.5 <= observed <= MAX_RATIO:
            return  # a count of something else (a refusal quoting another request, a batch), not this prompt
        if self.ratios is not None:
            self.ratios.observe(self.ratio_key, observed, source)
        else:
            current = self._ratio["ratio"] if self._ratio else None
            samples = self._ratio["samples"] + 1 if self._ratio else 1
            self._ratio = {"ratio": next_ratio(current, observed), "last_observed": observed,
                           "samples": samples, "source": source}

    def _corrected(self, window: windows.Window) -> windows.Window:
        known = self._stored_ratio()
        if known is None and window.reachable and self._tokenize_ratio(self._last_text or CALIBRATION_TEXT):
            known = self._stored_ratio()
        if known is None:
            return windows.with_ratio(window, 1.0, "not measured yet: the server has not counted a prompt")
        ratio = min(max(known["ratio"], MIN_RATIO), MAX_RATIO)
        how = {"tokenize": "counted by the server's /tokenize", "usage": "from the prompt tokens it reported",
               "refusal": "from the count in the server's refusal"}
        detail = (f"this model counts {known['ratio']:.3f}× our cl100k estimate ({how.get(known['source'], known['source'])}, "
                  f"{known['samples']} measurement{'s' if known['samples'] != 1 else ''}); prompts are sized by ×{ratio:.3f}")
        return windows.with_ratio(window, ratio, detail)

    def _server_count(self, text: str) -> int | None:
        """The server's own token count for `text` (llama.cpp's server and vLLM
        answer /tokenize; Ollama does not), or None."""
        if self._can_tokenize is False or not text:
            return None
        try:
            status, body = read_json(self.client, "POST", f"{windows.native_base(self.base_url)}/tokenize",
                                     json={"content": text, "prompt": text, "model": self.model,
                                           "add_special": False},
                                     timeout=httpx.Timeout(max(windows.PROBE_TIMEOUT, 10.0),
                                                           connect=windows.CONNECT_TIMEOUT),
                                     limit=MAX_LINE * 4)
        except (httpx.HTTPError, EndpointRefused):
            return None
        count = None
        if status == 200 and isinstance(body, dict):
            count = _count(body.get("count"))
            if count is None and isinstance(body.get("tokens"), list):
                count = len(body["tokens"])
        self._can_tokenize = count is not None
        return count

    def _tokenize_ratio(self, text: str) -> bool:
        counted = self._server_count(text)
        if counted:
            self._observe(counted / max(1, tokens.count(text)), "tokenize")
        return bool(counted)

    # ------------------------------------------------------------ the request
    def _request(self, prompt: Prompt) -> tuple[str, dict]:
        body = {"model": self.model, "temperature": prompt.temperature, "max_tokens": prompt.max_tokens,
                "stream": True, "stream_options": {"include_usage": True}, **_samplers(prompt.sampling)}
        messages = [{"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user_text}]
        if self.api_mode == "completion":
            body["prompt"] = "\n\n".join(f"{ROLE_LABELS[m['role']]}: {m['content']}" for m in messages) + "\n\nAssistant:"
            return f"{self.base_url}/completions", body
        body["messages"] = messages
        return f"{self.base_url}/chat/completions", body

    def _estimate(self, prompt: Prompt) -> int:
        """Our cl100k count of what is sent, as the builder priced it (cached counts)."""
        hint = tokens.count(CONTINUE_HINT) if prompt.task == "narrate" else 0
        return tokens.count(prompt.system) + tokens.count(prompt.story) + hint

    def _guard(self, prompt: Prompt) -> None:
        """Where the server can count, count the real prompt before sending it:
        learn the ratio from it, and refuse a prompt that cannot fit rather
        than have the server cut it."""
        window = self._window
        if prompt.task != "narrate" or window is None or not window.verified:
            return
        text = f"{prompt.system}\n\n{prompt.user_text}"
        counted = self._server_count(text)
        if not counted:
            return
        self._observe(counted / max(1, self._estimate(prompt)), "tokenize")
        if counted + prompt.max_tokens > window.tokens:
            raise NarratorError(
                f"By the server's own count this prompt is {counted:,} tokens; with {prompt.max_tokens:,} for the "
                f"reply that is more than its {window.tokens:,}-token window, so it was not sent. The estimate is "
                "now corrected for this model's tokenizer: try again and the prompt will be built smaller.")

    def execute(self, prompt: Prompt) -> Iterator[Chunk]:
        url, body = self._request(prompt)
        self._guard(prompt)
        tally = _Tally()
        reader = _Reader(self.stream_client, url, body)
        try:
            yield from self._read(reader, prompt, tally)
        finally:
            reader.abort()
        usage = tally.usage()
        self._learn(prompt, usage)
        yield usage

    def _learn(self, prompt: Prompt, usage: Usage) -> None:
        self._last_text = f"{prompt.system}\n\n{prompt.user_text}" if prompt.task == "narrate" else self._last_text
        reported, window = usage.prompt_tokens, self._window
        if prompt.task != "narrate" or not reported or self._can_tokenize:
            return
        if window is not None and window.tokens and reported >= window.tokens - prompt.max_tokens:
            return  # at the edge the server may have cut the prompt: its count is not the prompt's
        self._observe(reported / max(1, self._estimate(prompt)), "usage")

    def _read(self, reader: _Reader, prompt: Prompt, tally: _Tally) -> Iterator[Chunk]:
        started = time.monotonic()
        budget = {"text": reply_limit(prompt.max_tokens), "reasoning": MAX_REASONING_TOKENS}
        while True:
            self._check_clock(started)
            try:
                kind, item = reader.get()
            except queue.Empty:
                yield Status(f"Waiting for the server ({time.monotonic() - started:.0f} s)")
                continue
            if kind == "end":
                return
            if kind == "error":
                raise friendly_error(item, self.base_url, self.model, self.timeout) from item
            if kind == "status":
                raise self._refusal(*item, prompt)
            payload = _payload(item)
            if payload is _DONE:
                return
            if payload is None:
                continue
            if payload.get("error"):  # llama.cpp and vLLM report a failure mid-stream as an event
                raise _status_error(_error_code(payload), server_message(json.dumps(payload)), self.base_url,
                                    self.model)
            tally.add(payload)
            for chunk in self._chunks(payload):
                chunk, full = _spend(chunk, budget)
                if chunk is not None:
                    yield chunk
                if full:
                    return

    def _check_clock(self, started: float) -> None:
        waited = time.monotonic() - started
        if waited > self.wall_clock:
            raise NarratorError(f"The endpoint {self.base_url} was still sending after {waited:.0f} s, the limit for "
                                f"one reply ({WALL_CLOCK_TIMEOUTS} × timeout_seconds); it was cut off.")

    def _refusal(self, status: int, message: str, prompt: Prompt) -> NarratorError:
        if self._about_context(status, message):
            return self._context_error(status, message, prompt)
        return _status_error(status, message, self.base_url, self.model)

    @staticmethod
    def _about_context(status: int, message: str) -> bool:
        return status == 413 or (status == 400 and bool(_CONTEXT_WORDS.search(message)))

    def _context_error(self, status: int, message: str, prompt: Prompt) -> NarratorError:
        """The prompt was too long for the server: ask it its window again, now,
        and learn the tokenizer ratio from its count where it gave one."""
        counted = re.search(r"(?:request \(|requested )(\d+) tokens", message)
        if counted and prompt.task == "narrate":
            self._observe(int(counted.group(1)) / max(1, self._estimate(prompt)), "refusal")
        before = self._window.tokens if self._window else None
        self._can_tokenize = None
        now = windows.probe(self.client, self.base_url, self.model, declared=self.declared_window)
        if now.verified and before and now.tokens != before:
            news = (f" Asked again, the server now reports a {now.tokens:,}-token window (the prompt was built to "
                    f"{before:,}): it was restarted or the model reloaded. The next turn is built to the new window.")
        elif now.verified:
            news = (f" Asked again, the server still reports {now.tokens:,} tokens: the estimate ran short for this "
                    "model's tokenizer. The next turn measures it again and builds a smaller prompt.")
        else:
            news = f" Asked again, the server could not say its window ({now.detail}). Set context_window_override."
        return NarratorError(f"The endpoint returned HTTP {status}: the prompt was larger than the server accepts "
                             f"for its window.{_said(message)}{news}")

    def _chunks(self, payload: dict) -> Iterator[Chunk]:
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}  # message: an answer sent whole
            for key in REASONING_KEYS:
                if isinstance(delta.get(key), str) and delta[key]:
                    yield Reasoning(_clean(delta[key]))
            text = delta.get("content") if self.api_mode == "chat" else choice.get("text")
            if isinstance(text, str) and text:
                yield Text(_clean(text))


_DONE = object()


def _error_code(payload: dict) -> int:
    error = payload.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if type(code) is int and 400 <= code <= 599 else 500


def _payload(line: bytes):
    """One SSE line: a JSON payload, _DONE, or None for anything else (comments,
    blanks). A line that is a bare JSON object is a server (or proxy) that
    ignored `stream: true` and answered whole; it is read the same way."""
    line = line.strip()
    if line.startswith(b"{"):
        data = line
    elif line.startswith(b"data:"):
        data = line[5:].strip()
    else:
        return None
    if data == b"[DONE]":
        return _DONE
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise NarratorError(f"The endpoint sent a stream line that is not JSON: {_clean(data[:120].decode('utf-8', 'replace'))!r}") from exc
    return payload if isinstance(payload, dict) else None


def _spend(chunk: Chunk, budget: dict) -> tuple[Chunk | None, bool]:
    """Charge a chunk to the reply's token allowance; cut it where the allowance ends."""
    key = "reasoning" if isinstance(chunk, Reasoning) else "text"
    left = budget[key]
    piece = chunk.text[: left * 32]  # no token is 32 characters long: never encode a 10 MB line whole
    ids = tokens.encoding().encode(piece, disallowed_special=())
    budget[key] = left - len(ids)
    if budget[key] >= 0 and len(piece) == len(chunk.text):
        return chunk, False
    kept = tokens.encoding().decode(ids[:left])
    cut = type(chunk)(kept) if kept else None
    return cut, True
