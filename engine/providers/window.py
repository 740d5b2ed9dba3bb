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

import re
import time
from dataclasses import asdict, dataclass, field

import httpx

from .endpoints import EndpointRefused, rejection_reason

__all__ = [
    "CONNECT_TIMEOUT",
    "DECLARED",
    "EMBEDDED",
    "LOADED",
    "MODELS",
    "NEGATIVE_TTL",
    "PARAMETERS",
    "POSITIVE_TTL",
    "PROBE_TIMEOUT",
    "PROPS",
    "UNKNOWN",
    "Window",
    "cache_clear",
    "effective_budget",
    "ensure_window",
    "native_base",
    "probe",
]

# In the turn path: a server that does not answer in two seconds has told us
# what we need to know.
PROBE_TIMEOUT = 2.0
CONNECT_TIMEOUT = 1.5
# A verified window changes only when someone reloads the model.
POSITIVE_TTL = 600.0
# The commonest failure is a server still starting up.
NEGATIVE_TTL = 60.0

LOADED = "loaded"          # Ollama /api/ps: what the running model enforces now
PARAMETERS = "parameters"  # Ollama /api/show num_ctx: what it will load with
PROPS = "props"            # llama.cpp server /props n_ctx
MODELS = "models"          # vLLM /v1/models max_model_len
EMBEDDED = "embedded"      # the in-process model's own n_ctx
DECLARED = "declared"      # settings.context_window_override
UNKNOWN = "unknown"
FROM_SERVER = (LOADED, PARAMETERS, PROPS, MODELS, EMBEDDED)


@dataclass(frozen=True)
class Window:
    tokens: int | None
    source: str = UNKNOWN
    model_max: int | None = None
    detail: str = ""
    reachable: bool = False
    preflight: dict = field(default_factory=dict, compare=False)

    @property
    def verified(self) -> bool:
        return self.tokens is not None and self.source in FROM_SERVER

    def as_dict(self) -> dict:
        out = asdict(self)
        out["verified"] = self.verified
        return out


def native_base(url: str) -> str:
    """`http://host:11434/v1` -> `http://host:11434` (where /api and /props live)."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def safety_reserve(window: int) -> int:
    """Tokens left unused on purpose, sized to the effective window: the server's
    tokenizer is not ours. The reference's v1 prompts came within 23 tokens of
    the edge; max(256, 5%) kept its smallest observed margin at 879."""
    return max(256, -(-max(0, window) * 5 // 100))


def effective_budget(configured: int, window: Window | None) -> int:
    if window is None or not window.tokens or window.tokens <= 0:
        return configured
    return min(configured, window.tokens)


_cache: dict[tuple[str, str], tuple[float, Window]] = {}
_clock = time.monotonic


def cache_clear() -> None:
    _cache.clear()


def _positive_int(value) -> int | None:
    return value if type(value) is int and value > 0 else None


def _ollama_loaded(client: httpx.Client, native: str, model: str) -> tuple[bool, Window | None]:
    reply = client.get(f"{native}/api/ps")
    if reply.status_code != 200:
        return False, None
    for entry in reply.json().get("models") or []:
        if model in (entry.get("name"), entry.get("model")):
            tokens = _positive_int(entry.get("context_length"))
            if tokens:
                return True, Window(tokens, LOADED, None, f"{tokens:,} tokens, reported by the running model", True)
    return True, None


def _ollama_parameters(client: httpx.Client, native: str, model: str) -> Window:
    reply = client.post(f"{native}/api/show", json={"model": model})
    if reply.status_code != 200:
        return Window(None, UNKNOWN, None, f"the server did not describe the model (HTTP {reply.status_code})", True)
    body = reply.json()
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
    reply = client.get(f"{native}/props")
    if reply.status_code != 200:
        return None
    body = reply.json()
    tokens = _positive_int((body.get("default_generation_settings") or {}).get("n_ctx")) or _positive_int(body.get("n_ctx"))
    if tokens:
        return Window(tokens, PROPS, None, f"{tokens:,} tokens per slot, reported by the llama.cpp server", True)
    return None


def _openai_models(client: httpx.Client, base: str, model: str) -> Window | None:
    reply = client.get(f"{base.rstrip('/')}/models")
    if reply.status_code != 200:
        return None
    for entry in reply.json().get("data") or []:
        if entry.get("id") == model:
            tokens = _positive_int(entry.get("max_model_len"))
            if tokens:
                return Window(tokens, MODELS, tokens, f"{tokens:,} tokens, the server's max_model_len", True)
    return None


def _ask(client: httpx.Client, base: str, model: str) -> Window:
    reason = rejection_reason(base)
    if reason:
        return Window(None, UNKNOWN, None, f"endpoint not allowed: {reason}", False)
    native = native_base(base)
    try:
        is_ollama, loaded = _ollama_loaded(client, native, model)
        if loaded:
            return loaded
        if is_ollama:
            return _ollama_parameters(client, native, model)
        found = _llamacpp_props(client, native) or _openai_models(client, base, model)
        return found or Window(None, UNKNOWN, None, "the server did not say how large its window is "
                               "(asked /api/ps, /props and /models)", True)
    except (httpx.HTTPError, EndpointRefused, ValueError, TypeError, KeyError, AttributeError) as exc:
        return Window(None, UNKNOWN, None, f"could not ask the server ({type(exc).__name__})", False)


def _declared_or(declared: int | None, found: Window) -> Window:
    if found.verified or not declared or declared <= 0:
        return found
    return Window(declared, DECLARED, found.model_max,
                  f"{declared:,} tokens, declared in settings; the server could not say ({found.detail})",
                  found.reachable)


def probe(client: httpx.Client, base: str, model: str, *, declared: int | None = None, use_cache: bool = True) -> Window:
    if not base or not model:
        return _declared_or(declared, Window(None, UNKNOWN, None, "no endpoint or model configured"))
    key = (base, model)
    hit = _cache.get(key)
    if use_cache and hit and hit[0] > _clock():
        found = hit[1]
    else:
        found = _ask(client, base, model)
        _cache[key] = (_clock() + (POSITIVE_TTL if found.verified else NEGATIVE_TTL), found)
    return _declared_or(declared, found)


def _warm(client: httpx.Client, base: str, model: str, timeout: float) -> tuple[bool, str]:
    """Ask Ollama to load the model (no prompt, nothing generated), so it can report its window."""
    reason = rejection_reason(base)
    if reason:
        return False, f"endpoint not allowed: {reason}"
    try:
        reply = client.post(f"{native_base(base)}/api/generate", json={"model": model},
                            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT))
    except httpx.HTTPError as exc:
        return False, f"could not ask the server to load the model ({type(exc).__name__})"
    if reply.status_code != 200:
        return False, f"the server did not load the model (HTTP {reply.status_code})"
    try:
        body = reply.json()
    except ValueError:
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
            window = probe(client, base, model, declared=declared, use_cache=False)
    preflight["verified_after"] = window.verified
    return Window(window.tokens, window.source, window.model_max, window.detail, window.reachable, preflight)
