"""A simple, pure context assembly: system rules, then as much recent story
as the budget allows, then the new input.

This is the seam the full builder (sections, block trim, knowledge, memory)
replaces: the turn loop calls `build` and stores its report, nothing else.
It makes no network call and writes nothing.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import TurnFailed
from . import tokens

__all__ = ["Brief", "Built", "ContextOverflow", "Line", "build", "render_line", "safety_reserve"]

# Per-message wrapping the chat template adds (role markers, separators);
# counted so the estimate does not run short on many small lines.
FORMAT_OVERHEAD = 16


class ContextOverflow(TurnFailed):
    """What must be sent does not fit the budget; the turn is refused unwritten."""


@dataclass(frozen=True)
class Brief:
    """The campaign facts the narrator is always told."""

    title: str = ""
    premise: str = ""
    protagonist: str = ""
    ai_instructions: str = ""
    authors_note: str = ""


@dataclass(frozen=True)
class Line:
    kind: str
    text: str


@dataclass
class Built:
    system: str
    story: str
    report: dict = field(default_factory=dict)


def safety_reserve(window: int) -> int:
    """Tokens left unused on purpose: the server's tokenizer is not ours.
    max(256, 5%) kept the reference's smallest observed margin at 879 tokens."""
    return max(256, math.ceil(0.05 * window))


def render_line(line: Line) -> str:
    if line.kind == "direction":
        return f"[Story direction from the player: {line.text}]"
    return line.text


def _system(rules: str, brief: Brief) -> list[tuple[str, str]]:
    parts = [("narrator_rules", rules)]
    if brief.premise:
        parts.append(("premise", f"The story so far is set up like this: {brief.premise}"))
    if brief.protagonist:
        parts.append(("protagonist", f"The player's character is {brief.protagonist}."))
    if brief.ai_instructions:
        parts.append(("ai_instructions", brief.ai_instructions))
    return parts


def build(
    brief: Brief,
    history: Sequence[Line],
    *,
    rules: str,
    budget: int,
    max_output: int,
    window: int | None,
    history_total: int | None = None,
) -> Built:
    effective = min(budget, window) if window else budget
    reserve = safety_reserve(effective)
    system_parts = _system(rules, brief)
    system = "\n\n".join(text for _, text in system_parts)
    note = f"[Author's note: {brief.authors_note}]" if brief.authors_note else ""
    protected = tokens.count(system) + tokens.count(note) + FORMAT_OVERHEAD + max_output + reserve
    if protected >= effective:
        raise ContextOverflow(
            f"The prompt cannot fit: the narrator rules and campaign text take "
            f"{tokens.count(system) + tokens.count(note)} tokens, the reply {max_output}, "
            f"formatting {FORMAT_OVERHEAD} and the safety reserve {reserve}, "
            f"which is {protected} of a {effective}-token budget. "
            + (
                f"The server's window ({window}) is what binds: load the model with a larger window."
                if window and window < budget
                else "Raise context_budget with wb.configure(context_budget=...)."
            )
        )
    room = effective - protected
    chosen: list[str] = []
    for line in reversed(history):
        text = render_line(line)
        cost = tokens.count(text) + 1
        if cost > room:
            break
        chosen.append(text)
        room -= cost
    chosen.reverse()
    story = "\n\n".join(chosen + ([note] if note else []))
    history_tokens = sum(tokens.count(t) + 1 for t in chosen)
    sections = [
        {"name": name, "tokens": tokens.count(text), "why": "always sent"} for name, text in system_parts
    ]
    sections.append(
        {"name": "history", "tokens": history_tokens, "why": f"newest {len(chosen)} lines that fit"}
    )
    if note:
        sections.append({"name": "authors_note", "tokens": tokens.count(note), "why": "set on the campaign"})
    estimate = tokens.count(system) + tokens.count(story) + FORMAT_OVERHEAD
    report = {
        "builder": "simple-1",
        "system": system,
        "story": story,
        "sections": sections,
        "budget": {"configured": budget, "effective": effective, "reserve": reserve, "max_output": max_output},
        "window": {"tokens": window},
        "history": {"included": len(chosen), "total": history_total if history_total is not None else len(history)},
        "estimate": estimate,
    }
    return Built(system, story, report)
