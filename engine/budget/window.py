"""The window a prompt is built to, as plain arithmetic.

Below both the narrators (which find the window) and the context builder
(which builds to it), so neither imports the other: a `Window` is a value,
the reserve and the effective budget are pure functions of it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["DECLARED", "EMBEDDED", "FROM_SERVER", "LOADED", "MODELS", "PARAMETERS", "PROPS", "UNKNOWN", "Window",
           "effective_budget", "safety_reserve", "with_ratio"]

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
    # Server tokens per cl100k token for this model, as measured (1.0 until
    # measured); the builder divides the room for the prompt by it.
    token_ratio: float = 1.0
    ratio_detail: str = ""
    # The tokens the server reported when last asked, when that differs.
    changed_from: int | None = None

    @property
    def verified(self) -> bool:
        return self.tokens is not None and self.source in FROM_SERVER

    def as_dict(self) -> dict:
        out = asdict(self)
        out["verified"] = self.verified
        return out


def safety_reserve(window: int) -> int:
    """Tokens left unused on purpose, sized to the effective window: the server's
    tokenizer is not ours. The reference's v1 prompts came within 23 tokens of
    the edge; max(256, 5%) kept its smallest observed margin at 879."""
    return max(256, -(-max(0, window) * 5 // 100))


def effective_budget(configured: int, window: Window | None) -> int:
    if window is None or not window.tokens or window.tokens <= 0:
        return configured
    return min(configured, window.tokens)


def with_ratio(window: Window, ratio: float, detail: str) -> Window:
    return replace(window, token_ratio=ratio, ratio_detail=detail)
