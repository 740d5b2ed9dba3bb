"""The window the narrator really gets, asked of the server itself.

A server does not refuse an over-long prompt: Ollama at its default 4,096
window kept 2,050 of 13,875 tokens with an HTTP 200, cutting from the start,
which is where the narrator's rules and the canon are. So the prompt is built
to the window the server reports. A window the server reported is "verified";
one declared in settings is used only when the server cannot be asked and is
never called verified; with neither, the window is reported as unknown (no
4,096 guess, no table of model sizes).
"""
from __future__ import annotations

import posixpath
import re
import threading
from dataclasses import replace

import httpx

from ..budget.window import (
    DECLARED,
    EMBEDDED,
    LOADED,
    MODELS,
    PARAMETERS,
    PROPS,
    UNKNOWN,
    Window,
    effective_budget,
    with_ratio,
)
from .endpoints import EndpointRefused, rejection_reason
from .http import ResponseRefused, read_json

__all__ = [
    "CONNECT_TIMEOUT",
    "DECLARED",
    "EMBEDDED",
    "LOADED",
    "MODELS",
    "PARAMETERS",
    "PROBE_TIMEOUT",
    "PROPS",
    "UNKNOWN",
    "Window",
    "cache_clear",
    "effective_budget",
    "ensure_window",
    "find_model",
    "model_matches",
    "native_base",
    "probe",
    "with_ratio",
]

# In the turn path: a server that does not answer in two seconds has told us
# what we need to know.
PROBE_TIMEOUT = 2.0
CONNECT_TIMEOUT = 1.5
# No window is trusted past the moment it was reported. A 600 s cache let a
# server restarted with -c 2048 be built to its old 8,192 (HTTP 400), and a
# 60 s cache of a failed probe built a turn to the 16,384 budget after the
# server came back. Asking costs one or two small requests per turn.

def native_base(url: str) -> str:
    """`http://host:11434/v1` -> `http://host:11434` (where /api and /props live)."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


# The last verified window per (endpoint, model), and which question the
# server answered last: kept only to say "the window changed" and to ask the
# right endpoint first, never to skip asking.
_last: dict[tuple[str, str], int] = {}
_answered: dict[str, str] = {}
_lock = threading.Lock()


def cache_clear() -> None:
    with _lock:
        _last.clear()
        _answered.clear()


def model_matches(wanted: str, offered: str, aliases=()) -> bool:
    """llama.cpp's server lists its model under the GGUF path it was started
    with (or its --alias): a model named by file name, by stem or by alias is
    the same model. Other names (Ollama tags, vLLM repo ids) match exactly."""
    if not wanted or not offered:
        return False
    names = {offered, *[a for a in aliases or () if isinstance(a, str)]}
    names |= _file_names(offered)
    return bool(({wanted} | _file_names(wanted)) & names)


def find_model(wanted: str, entries) -> tuple[dict | None, list[str]]:
    """(the entry of a server's model list that `wanted` names, the candidates
    when it names several). An exact name (model_matches) wins; otherwise a
    name that begins a GGUF file's name, up to a `.`, `-` or `_`, finds it
    when it is the only one: "SmolLM2-135M-Instruct" is the server started
    with SmolLM2-135M-Instruct.Q4_1.gguf. Two files it begins make it
    ambiguous: no entry, and both names, so the refusal can list them."""
    entries = [e for e in entries or () if isinstance(e, dict) and isinstance(e.get("id"), str)]
    if not wanted:
        return None, []
    for entry in entries:
        if model_matches(wanted, entry["id"], entry.get("aliases")):
            return entry, []
    begun = [e for e in entries if any(_begins(wanted, n) for n in _file_names(e["id"]))]
    if len(begun) == 1:
        return begun[0], []
    return None, [e["id"] for e in begun]


def _begins(wanted: str, name: str) -> bool:
    return len(name) > len(wanted) and name.startswith(wanted) and name[len(wanted)] in "._-"


def _file_names(name: str) -> set[str]:
    """A GGUF path's file name and stem; nothing for a name that is not a path."""
    name = name.replace("\\", "/")
    if not (name.endswith(".gguf") or name.startswith("/")):
        return set()
    base = posixpath.basename(name)
    return {base, base.removesuffix(".gguf")}


def _positive_int(value) -> int | None:
    return value if type(value) is int and value > 0 else None


def _get(client: httpx.Client, method: str, url: str, **kwargs):
    return read_json(client, method, url, timeout=httpx.Timeout(PROBE_TIMEOUT, connect=CONNECT_TIMEOUT), **kwargs)


def _ollama_loaded(client: httpx.Client, native: str, model: str) -> tuple[bool, Window | None]:
    status, body = _get(client, "GET", f"{native}/api/ps")
    if status != 200 or not isinstance(body, dict):
        return False, None
    for entry in body.get("models") or []:
        if model in (entry.get("name"), entry.get("model")):
            tokens = _positive_int(entry.get("context_length"))
            if tokens:
                return True, Window(tokens, LOADED, None, f"{tokens:,} tokens, reported by the running model", True)
    return True, None


def _ollama_parameters(client: httpx.Client, native: str, model: str) -> Window:
    status, body = _get(client, "POST", f"{native}/api/show", json={"model": model})
    if status != 200 or not isinstance(body, dict):
        return Window(None, UNKNOWN, None, f"the server did not describe the model (HTTP {status})", True)
    info = body.get("model_info") or {}
    ceiling = next((_positive_int(v) for k, v in info.items() if k.endswith(".context_length") and _positive_int(v)), None)
    params = body.get("parameters")
    match = re.search(r"^\s*num_ctx\s+(\d+)\s*$", params, re.MULTILINE) if isinstance(params, str) else None
    if not match:
        return Window(None, UNKNOWN, ceiling, "the model sets no num_ctx, so the server will load it at its "
                      "own default (4,096 where there is no GPU memory); load it once to find out", True)
    tokens = min(int(match.group(1)), ceiling) if ceiling else int(match.group(1))
    return Window(tokens, PARAMETERS, ceiling, f"{tokens:,} tokens, from the model's own num_ctx", True)


def _llamacpp_props(client: httpx.Client, native: str) -> Window | None:
    status, body = _get(client, "GET", f"{native}/props")
    if status != 200 or not isinstance(body, dict):
        return None
    tokens = _positive_int((body.get("default_generation_settings") or {}).get("n_ctx")) or _positive_int(body.get("n_ctx"))
    if tokens:
        return Window(tokens, PROPS, None, f"{tokens:,} tokens per slot, reported by the llama.cpp server", True)
    return None


def _openai_models(client: httpx.Client, base: str, model: str) -> Window | None:
    status, body = _get(client, "GET", f"{base.rstrip('/')}/models")
    if status != 200 or not isinstance(body, dict):
        return None
    entry, _ = find_model(model, body.get("data") or [])
    tokens = _positive_int(entry.get("max_model_len")) if entry else None
    if tokens:
        return Window(tokens, MODELS, tokens, f"{tokens:,} tokens, the server's max_model_len", True)
    return None


def _ask(client: httpx.Client, base: str, model: str) -> Window:
    reason = rejection_reason(base)
    if reason:
        return Window(None, UNKNOWN, None, f"endpoint not allowed: {reason}", False)
    native = native_base(base)
    try:
        if _answered.get(native) == PROPS:  # a llama.cpp server: skip the Ollama question
            found = _llamacpp_props(client, native)
            if found:
                return found
        is_ollama, loaded = _ollama_loaded(client, native, model)
        if loaded:
            return loaded
        if is_ollama:
            return _ollama_parameters(client, native, model)
        found = _llamacpp_props(client, native) or _openai_models(client, base, model)
        return found or Window(None, UNKNOWN, None, "the server did not say how large its window is "
                               "(asked /api/ps, /props and /models)", True)
    except EndpointRefused as exc:
        return Window(None, UNKNOWN, None, f"endpoint not allowed: {exc}", False)
    except ResponseRefused as exc:
        return Window(None, UNKNOWN, None, f"the server's answer was refused: {exc}", True)
    except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return Window(None, UNKNOWN, None, f"could not ask the server ({type(exc).__name__})", False)


def _declared_or(declared: int | None, found: Window) -> Window:
    if found.verified or not declared or declared <= 0:
        return found
    return Window(declared, DECLARED, found.model_max,
                  f"{declared:,} tokens, declared in settings; the server could not say ({found.detail})",
                  found.reachable)


def probe(client: httpx.Client, base: str, model: str, *, declared: int | None = None) -> Window:
    """Ask the server now. Says so when the window differs from the last answer."""
    if not base or not model:
        return _declared_or(declared, Window(None, UNKNOWN, None, "no endpoint or model configured"))
    found = _ask(client, base, model)
    if found.verified:
        with _lock:
            before = _last.get((base, model))
            _last[(base, model)] = found.tokens
            _answered[native_base(base)] = found.source
        if before and before != found.tokens:
            found = replace(found, changed_from=before,
                            detail=f"{found.detail}; it was {before:,} when last asked, so the server was "
                                   "restarted or the model reloaded")
    return _declared_or(declared, found)


def _warm(client: httpx.Client, base: str, model: str, timeout: float) -> tuple[bool, str]:
    """Ask Ollama to load the model (no prompt, nothing generated), so it can report its window."""
    reason = rejection_reason(base)
    if reason:
        return False, f"endpoint not allowed: {reason}"
    try:
        status, body = read_json(client, "POST", f"{native_base(base)}/api/generate", json={"model": model},
                                 timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT))
    except httpx.HTTPError as exc:
        return False, f"could not ask the server to load the model ({type(exc).__name__})"
    if status != 200:
        return False, f"the server did not load the model (HTTP {status})"
    if not isinstance(body, dict):
        return False, "the server answered the load request with something that was not JSON"
    return True, f"the server loaded the model ({body.get('done_reason') or 'done'})"


def ensure_window(client: httpx.Client, base: str, model: str, *, declared: int | None = None,
                  warm_timeout: float = 300.0) -> Window:
    """Probe; if a reachable Ollama has not loaded the model yet, load it once and ask again."""
    window = probe(client, base, model, declared=declared)
    preflight = {"attempted": False, "loaded": None, "verified_before": window.verified, "detail": ""}
    if window.verified:
        preflight["detail"] = "the window was already verified"
    elif not window.reachable:
        preflight["detail"] = "the server did not answer, so no model was loaded"
    elif window.source == DECLARED or window.source == UNKNOWN:
        loaded, detail = _warm(client, base, model, warm_timeout)
        preflight.update(attempted=True, loaded=loaded, detail=detail)
        if loaded:
            window = probe(client, base, model, declared=declared)
    preflight["verified_after"] = window.verified
    return replace(window, preflight=preflight)
