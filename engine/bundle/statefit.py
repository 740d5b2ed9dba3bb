"""An imported narrative state held to its bound as the prompt shows it.

Every turn shows the state at the head whole (engine.narrative.render), and
the renderer caps how many entities, facts and threads it lists but not how
long each text is: a bundle whose state held 40,000 characters of rare CJK
imported cleanly and then needed 159,640 protected tokens on its first turn.
A state past its bound (engine.budget.standing, "state") keeps its keys and
references; its texts are shortened step by step until it fits, and only if
that is not enough are its sections emptied, least-read first.
"""
from __future__ import annotations

import json
from typing import Any

from ..budget import standing
from ..narrative.model import SECTIONS
from ..narrative.render import render_state

__all__ = ["fit_state", "state_key"]

# Fields whose text names an entity by its key: never shortened (a cut key
# would name nothing).
_REFERENCES = {"location", "present", "subject", "object", "source", "target", "id", "type", "status"}
_LIMITS = (400, 200, 100, 50, 20)
# Emptied in this order when shortening is not enough: what the narrator
# reads last, first.
_SECTIONS = ("threads", "relationships", "facts", "possessions", "entities", "scene")


def state_key(document: dict) -> str:
    return json.dumps(document, sort_keys=True, ensure_ascii=False, default=str)


def _cost(document: dict, seen: dict[str, int]) -> int:
    """Tokens of the state as the prompt shows it (one past the bound when it
    is too long to count); states repeat from node to node, so each distinct
    one is rendered once per import."""
    key = state_key(document)
    if key not in seen:
        text = render_state(document)
        cost = standing.measure("state", text)
        seen[key] = standing.BOUNDS["state"].tokens + 1 if cost is None else cost
    return seen[key]


def _shortened(value: Any, limit: int, field: str = "") -> Any:
    if isinstance(value, str):
        return value if field in _REFERENCES or len(value) <= limit else value[:limit].rstrip() + "…"
    if isinstance(value, list):
        return [_shortened(v, limit, field) for v in value]
    if isinstance(value, dict):
        return {k: _shortened(v, limit, k if isinstance(k, str) else "") for k, v in value.items()}
    return value


def fit_state(document: dict, seen: dict[str, int]) -> tuple[dict, str | None]:
    """(`document` within the state's bound, words saying how it was cut, or
    None when it already fitted). `seen` carries the measured costs across one
    import. The given document is never changed."""
    bound = standing.BOUNDS["state"]
    if not document or _cost(document, seen) <= bound.tokens:
        return document, None
    cut = document
    for limit in _LIMITS:
        cut = {**cut, **{name: _shortened(cut[name], limit) for name in SECTIONS if name in cut and name != "possessions"}}
        if _cost(cut, seen) <= bound.tokens:
            return cut, f"its texts were shortened to {limit} characters"
    emptied = []
    for name in _SECTIONS:
        cut = {**cut, name: SECTIONS[name]()}
        emptied.append(name)
        if _cost(cut, seen) <= bound.tokens:
            break
    return cut, f"its texts were shortened to {_LIMITS[-1]} characters and its {', '.join(emptied)} emptied"
