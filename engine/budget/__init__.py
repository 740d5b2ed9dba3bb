"""Token arithmetic every layer above shares: counting, the window, learned ratios.

    tokens   one counter (cl100k, offline), cached per immutable text
    window   the window a prompt is built to, and the reserve kept free
    ratios   server tokens per counted token, learned per model; usage verdicts
    hints    words a provider appends that the builder must price
"""
from . import hints, ratios, tokens, window
from .hints import CONTINUE_HINT
from .window import Window, effective_budget, safety_reserve

__all__ = ["CONTINUE_HINT", "Window", "effective_budget", "hints", "ratios", "safety_reserve", "tokens", "window"]
