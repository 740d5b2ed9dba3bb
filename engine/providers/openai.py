"""A narrator behind any OpenAI-compatible endpoint: Ollama, llama.cpp's
server, vLLM, LM Studio. One small class; the httpx client is its only I/O."""
from __future__ import annotations

import json
from collections.abc import Iterator

import httpx

from ..errors import NarratorError
from . import window as windows
from .base import Chunk, Prompt, Reasoning, Text, Usage
from .endpoints import EndpointRefused, check
from .http import bounded_timeout, make_client

__all__ = ["OpenAINarrator", "friendly_error"]

# Servers name the thinking stream differently: DeepSeek/vLLM
# `reasoning_content`, Ollama and OpenRouter `reasoning`, some `thinking`.
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
ROLE_LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}


def friendly_error(exc: Exception, base: str, model: str, timeout: float) -> NarratorError:
    if isinstance(exc, EndpointRefused):
        return NarratorError(str(exc))
    if isinstance(exc, httpx.TimeoutException):
        return NarratorError(f"The endpoint {base} did not answer within {timeout:.0f} s. A large model may "
                             "still be loading: try again, or raise timeout_seconds.")
    if isinstance(exc, httpx.ConnectError):
        return NarratorError(f"Could not connect to {base}. Is the server running and listening there "
                             "(for Ollama: `ollama serve`)?")
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        detail = _detail(exc.response)
        if status == 401:
            return NarratorError(f"The endpoint refused the request as unauthorized (HTTP 401). A local server "
                                 f"normally needs no key: check that {base} is the endpoint you meant. {detail}".strip())
        if status == 404:
            return NarratorError(f"Endpoint or model not found (HTTP 404). Check the endpoint URL and that the "
                                 f"model '{model}' exists on it. {detail}".strip())
        if status == 429:
            return NarratorError("The endpoint is refusing further requests for now (HTTP 429). Wait a moment "
                                 "and try again.")
        return NarratorError(f"The endpoint returned HTTP {status}. {detail}".strip())
    return NarratorError(f"The endpoint connection failed ({type(exc).__name__}: {exc}).")


def _detail(response: httpx.Response) -> str:
    try:
        response.read()
        body = response.json()
        error = body.get("error")
        return str(error.get("message") if isinstance(error, dict) else error or body)[:300]
    except Exception:  # noqa: BLE001 - the body is only a hint
        return response.text[:300] if response.is_stream_consumed else ""


class OpenAINarrator:
    def __init__(self, base_url: str, model: str, *, api_mode: str = "chat", timeout: float = 300.0,
                 client: httpx.Client | None = None, declared_window: int | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_mode = api_mode
        self.timeout = bounded_timeout(timeout)
        self.declared_window = declared_window
        self.client = client or make_client(self.timeout)
        self.model_id = model

    def context_window(self) -> windows.Window:
        return windows.ensure_window(self.client, self.base_url, self.model,
                                     declared=self.declared_window, warm_timeout=self.timeout)

    def peek_window(self) -> windows.Window:
        """The window as far as the server can say without loading anything (dry runs)."""
        return windows.probe(self.client, self.base_url, self.model, declared=self.declared_window)

    def _request(self, prompt: Prompt) -> tuple[str, dict]:
        body = {"model": self.model, "temperature": prompt.temperature, "max_tokens": prompt.max_tokens,
                "stream": True, "stream_options": {"include_usage": True}}
        messages = [{"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user_text}]
        if self.api_mode == "completion":
            body["prompt"] = "\n\n".join(f"{ROLE_LABELS[m['role']]}: {m['content']}" for m in messages) + "\n\nAssistant:"
            return f"{self.base_url}/completions", body
        body["messages"] = messages
        return f"{self.base_url}/chat/completions", body

    def execute(self, prompt: Prompt) -> Iterator[Chunk]:
        url, body = self._request(prompt)
        usage = Usage()
        try:
            check(url)
            with self.client.stream("POST", url, json=body) as response:
                response.raise_for_status()
                for payload in _events(response):
                    if isinstance(payload.get("usage"), dict):
                        u = payload["usage"]
                        usage = Usage(u.get("prompt_tokens"), u.get("completion_tokens"))
                    yield from self._chunks(payload)
        except (httpx.HTTPError, EndpointRefused) as exc:
            raise friendly_error(exc, self.base_url, self.model, self.timeout) from exc
        yield usage

    def _chunks(self, payload: dict) -> Iterator[Chunk]:
        for choice in payload.get("choices") or []:
            delta = choice.get("delta") or {}
            for key in REASONING_KEYS:
                if delta.get(key):
                    yield Reasoning(delta[key])
            text = delta.get("content") if self.api_mode == "chat" else choice.get("text")
            if text:
                yield Text(text)


def _events(response: httpx.Response) -> Iterator[dict]:
    """The JSON payloads of an SSE stream, up to `[DONE]`."""
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            yield json.loads(data)
        except json.JSONDecodeError as exc:
            raise NarratorError(f"The endpoint sent a stream line that is not JSON: {data[:120]!r}") from exc
