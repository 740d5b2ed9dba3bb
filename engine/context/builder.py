"""The context builder: what the narrator is shown, under one token budget.

Pure: it makes no network call and writes nothing. The turn gathers the
window, memories, knowledge and state first and passes them in; history is
read through a `HistorySource`, newest first, only as far as it can fit.

Order, for prefix caching (a server reuses the longest unchanged prefix,
and the embedded narrator also moves cached chunks of 32 tokens or more, but
re-reads everything after the first token it has not seen): the static
system block first; then the history, which only grows at its end except
when the block floor steps (forward only while memories are held). The
summary and the recalled units sit inside the history, after the node that
was newest when they were chosen (their anchor), with the emit reminder at
their end: while they stay the same they are part of what is reused, and a
new choice is written after the newest node, so only it and what follows
are read again. Then the input, knowledge by ascending authority, the units
recalled for this turn beside the held ones, the state, the length hint
(and the reminder, when nothing is held) and the input restated last.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..budget import tokens
from ..budget.hints import CONTINUE_HINT
from ..budget.window import Window, effective_budget, safety_reserve
from ..errors import ContextOverflow
from .history import HistorySource, Line, history_floor, trim_block
from .length import length_hint
from .report import Report

__all__ = [
    "Brief", "Inputs", "Knowledge", "Built", "build", "ContextOverflow", "render_line", "safety_reserve",
    "SEPARATOR", "AUTHORS_NOTE_DEPTH", "STORY_SECTION_SLOTS",
]

SEPARATOR = "\n\n"
# The author's note sits this many history lines from the end: close enough
# to steer the next passage, far enough not to read as the last thing said.
AUTHORS_NOTE_DEPTH = 3
# Story sections that can be joined after pricing: history (in two parts
# around the held memories), author's note, input, summary, knowledge (3
# classes), memories, this turn's memories, state, length hint, reminder, the
# input restated. Each costs one separator, priced up front.
STORY_SECTION_SLOTS = 14
# The turn's input said again as the last line before the reply, where a
# small model heeds it. On the narration evaluation's twelve tuning turns (SmolLM2-135M, short
# protocol rule) the reply took up what the input named in 6 of 11 with it and
# 3 of 11 without; "[Now narrate what happens next: ...]" did worse than "[Now: ...]".
RESTATE_INPUT = True
RESTATED_OPENING = "[Now:"

# Memories and the summary together take at most the search tuning's
# `memory_share` of the room left after the protected sections, the summary at
# most `summary_share` of that (engine.search.Tuning, with the measurement).
# First history read; doubled until the budget is covered or the story ends.
FIRST_FETCH = 64
# trim_block counts rows the size of one reply, i.e. turns; a turn here is two
# nodes (input and narration) and depth counts nodes. Measured on the 60-turn,
# 2,048-token check: with the block in raw nodes (2) the floor stepped on every
# turn and no two prompts shared their prefix; in nodes per turn (4) it holds
# every other turn with > 85% of the story prefix shared.
NODES_PER_TURN = 2


class Knowledge(Protocol):
    """Retrieved knowledge as the builder needs it (see engine.knowledge)."""

    def system_sections(self, budget: int) -> list[tuple[str, str]]:
        """The knowledge rule and always-in-force Canon: static, protected."""
        ...

    def select(self, tokens_available: int) -> tuple[list[tuple[str, str]], dict]:
        """Retrieved passages as (label, text) sections, ascending authority, and a report."""
        ...


@dataclass(frozen=True)
class Brief:
    """The campaign's standing text."""

    title: str = ""
    premise: str = ""
    protagonist: str = ""
    ai_instructions: str = ""
    authors_note: str = ""
    narration_length: str = ""
    canon_rules: tuple[str, ...] = ()


@dataclass
class Inputs:
    """What the turn gathered before building: nothing here is fetched by the builder."""

    pending: Line | None = None
    summary: str = ""
    summary_info: dict = field(default_factory=dict)
    memories: Sequence[dict] = ()
    memory_report: dict = field(default_factory=dict)
    knowledge: Knowledge | None = None
    state_text: str = ""
    emit_rule: str = ""
    reminder: str = ""
    derived: Sequence[dict] = ()
    # The reply's first words, when the turn starts the reply for the narrator:
    # priced here, as they are read before the reply is written.
    opening: str = ""
    # The previous prompt's held memories (its report's "held"): where they
    # stood, which summary and which units, so this prompt can keep them.
    held: dict = field(default_factory=dict)


@dataclass
class Built:
    system: str
    story: str
    report: Report
    opening: str = ""


def render_line(line: Line) -> str:
    if line.kind == "direction":
        return f"[Story direction from the player: {line.text}]"
    return line.text


def restated(line: Line | None) -> str:
    """The input said once more, last: after the history the state, the
    length hint and the reminder stand between it and the reply, and a 135M
    narrator took up the thing an input named in 1 reply of 19 (the narration evaluation, on the defaults)."""
    if line is None or not RESTATE_INPUT or not line.text.strip():
        return ""
    text = line.text.strip()
    if line.kind != "direction":
        text = text.lstrip("> ").strip()
    return f"{RESTATED_OPENING} {text}]"


def _system_sections(rules: str, brief: Brief, inputs: Inputs, budget: int) -> list[tuple[str, str, str]]:
    out = [("narrator_rules", rules, "always: the narrator's standing rules")]
    if inputs.emit_rule:
        out.append(("emit_rule", inputs.emit_rule, "always: how to report what the turn established"))
    if brief.canon_rules:
        body = "\n".join(f"- {r}" for r in brief.canon_rules)
        out.append(("campaign_canon", f"Campaign canon. These are true and nothing may contradict them:\n{body}",
                    "always: the campaign's own rules, the highest authority"))
    if inputs.knowledge is not None:
        out += [(label, text, "always: imported-knowledge framing and Canon marked always-include")
                for label, text in inputs.knowledge.system_sections(budget)]
    if brief.ai_instructions:
        out.append(("ai_instructions", brief.ai_instructions, "always: the campaign's instructions"))
    if brief.premise:
        out.append(("premise", f"The story's premise: {brief.premise}", "always: set when the campaign was made"))
    if brief.protagonist:
        out.append(("protagonist", f"The player's character is {brief.protagonist}.", "always: the protagonist"))
    return [s for s in out if s[1].strip()]


MEMORY_HEADER = ("Memories from earlier in the story. Lines marked [inferred] are interpretation, "
                 "not established fact; do not treat them as settled:")
# The units recalled for this turn beside the held ones (see _held), read
# after the input: short, since the narrator reads it anew every turn (7
# tokens; "Memories from earlier in the story, for this turn:" was 12).
FRESH_HEADER = "Also from earlier in the story:"


def _memory_line(memory: dict) -> str:
    return ("- [inferred] " if memory.get("authority") == "heuristic" else "- ") + memory["text"]


def _unit_key(memory: dict) -> tuple[str, int]:
    return (memory.get("unit", "memory"), memory.get("id"))


def _story_order(units: Sequence[dict]) -> list[dict]:
    # Ties broken by kind and id: held units come back in another order, and must read the same.
    return sorted(units, key=lambda m: (m.get("end") is None, m.get("end") or 0, m.get("start") or 0,
                                        str(m.get("unit", "memory")), m.get("id") if isinstance(m.get("id"), int) else 0))


def _memory_section(name: str, header: str, units: Sequence[dict], why: str) -> tuple[str, str, str]:
    return (name, header + "\n" + "\n".join(_memory_line(m) for m in _story_order(units)), why)


def _held(inputs: Inputs, tuning, window_start: int | None, newest: int | None) -> tuple[list[dict] | None, str]:
    """The previous prompt's memories, to be shown again unchanged at the same
    place, or None when they are chosen afresh, with the reason: the
    tuning's `recall_hold` is 0, or their anchor is that many turns old, or
    the summary changed, or a unit is no longer offered or its story is back
    inside the window."""
    held, hold = inputs.held or {}, tuning.recall_hold
    anchor = held.get("anchor")
    if not hold:
        return None, "no hold"
    if not isinstance(anchor, int) or newest is None or anchor > newest:
        return None, "nothing held before"
    if newest - anchor >= hold * NODES_PER_TURN:
        return None, "the hold ended"
    if held.get("summary") != inputs.summary_info.get("id"):
        return None, "the summary was rewritten"
    offered = {_unit_key(m): m for m in inputs.memories}
    out = []
    for key in held.get("units") or ():
        unit = offered.get(tuple(key)) if isinstance(key, list | tuple) and len(key) == 2 else None
        if unit is None:
            return None, "a held unit is no longer offered"
        if _inside(unit, window_start):
            return None, "a held unit's story is inside the window"
        out.append(unit)
    return out, "held"


def _live_sections(inputs: Inputs, room: int, tuning, top_k: int = 5, window_start: int | None = None,
                   newest: int | None = None
                   ) -> tuple[list[tuple[str, str, str]], list[dict], list[dict], str, list[tuple[str, int]]]:
    """The summary, then recalled units (memories, played lines, earlier
    summaries) within their share of `room`; returns the sections, what was
    dropped, the units kept, "held" when the previous prompt's were held
    (else why they were chosen afresh), and the keys of the units in the
    memories section (not this turn's own).

    They are priced before history like the protected sections, but they are
    not protected: a model that ignores the word limits must not make the
    campaign unplayable, so what does not fit is dropped and recorded. Together
    they take at most `tuning.memory_share` of the room (the summary at most `summary_share`
    of that, cut at a sentence end), so the story itself keeps the rest.
    A unit whose story is still inside the history window (depth at or
    past `window_start`) is not offered: the story itself is there. Chosen
    afresh, at most `top_k` memories and `tuning.recall_lines` other units
    are kept, shown in story order (oldest first). Held (`_held`), the
    previous prompt's units are kept as they were and at most
    `tuning.recall_fresh` of the best others are added in a section of
    their own, "memories_new"."""
    out, dropped, room_before = [], [], room
    room = int(room * tuning.memory_share)
    summary = inputs.summary.strip()
    if summary:
        full, limit = f"Story summary:\n{summary}", int(room * tuning.summary_share) - 1
        # Held, the summary keeps last prompt's cut while it fits: the room moves with the input's length.
        chars = (inputs.held or {}).get("summary_chars") if tuning.recall_hold else None
        same = (inputs.held or {}).get("summary") == inputs.summary_info.get("id")
        if same and isinstance(chars, int) and 0 < chars <= len(full) and tokens.count(full[:chars]) <= limit:
            text = full[:chars]
        else:
            text = _within(full, limit)
        if text:
            out.append(("story_summary", text, "the summary valid at this point"
                        + ("" if text.endswith(summary) else ", cut to its share of the budget")))
            room -= tokens.count(text) + 1
        else:
            dropped.append({"section": "story_summary", "tokens": tokens.count(summary)})
    hold = tuning.recall_hold
    held, why = _held(inputs, tuning, window_start, newest)
    shown_summary = next((t for n, t, _ in out if n == "story_summary"), "")
    if held is not None and len(shown_summary) != (inputs.held or {}).get("summary_chars", 0):
        # The summary no longer fits as it was cut: the block is read again anyway.
        held, why = None, "the summary no longer fits as it was cut"
    if held is not None and _lines_cost(held, MEMORY_HEADER) > room:
        held, why = None, "the held units no longer fit"
    if held is not None:
        block, block_dropped = held, 0
    else:
        # Chosen afresh; with a hold, a share of the room is left for the units of the turns to come.
        block, block_dropped = _pack(inputs.memories, room - (int(room * tuning.fresh_share) if hold else 0),
                                     top_k, tuning, window_start)
    shown, spent = {_unit_key(m) for m in block}, _lines_cost(block, MEMORY_HEADER)
    fresh, fresh_spent, unfit, best_unfit = [], tokens.count(FRESH_HEADER) + 1, 0, False
    # A Continue brings no words of the player's to recall for: the held
    # units stand for the recent story, and a unit of its own would be read
    # anew after the new content for nothing.
    for memory in inputs.memories if hold and inputs.pending is not None else ():
        if len(fresh) + unfit >= tuning.recall_fresh:
            break
        if _unit_key(memory) in shown or _inside(memory, window_start):
            continue
        cost = tokens.count(_memory_line(memory)) + 1
        if spent + fresh_spent + cost <= room:
            fresh.append(memory)
            fresh_spent += cost
        else:
            unfit += 1
            best_unfit = best_unfit or not fresh
    if best_unfit and held is not None:
        # This turn's best unit does not fit beside the held ones: the hold
        # never keeps it out; everything is chosen afresh instead. A later
        # one that does not fit is only left out.
        again = _live_sections(replace(inputs, held={}), room_before, tuning, top_k, window_start, newest)
        return (*again[:3], "this turn's best unit did not fit beside the held ones", again[4])
    if block_dropped + unfit:
        dropped.append({"section": "memories", "units": block_dropped + unfit})
    if block:
        out.append(_memory_section("memories", MEMORY_HEADER, block,
                                   f"{len(block)} recalled earlier, held where they were first shown" if held
                                   else f"{len(block)} recalled for the input and the recent story"))
    if fresh:
        out.append(_memory_section("memories_new", FRESH_HEADER, fresh,
                                   f"{len(fresh)} recalled for this input beside the held ones"))
    rank = {id(m): n for n, m in enumerate(inputs.memories)}
    return (out, dropped, sorted(block + fresh, key=lambda m: rank.get(id(m), len(rank))), why,
            [_unit_key(m) for m in block])


def _lines_cost(units: Sequence[dict], header: str) -> int:
    return (tokens.count(header) + 1 if units else 0) + sum(tokens.count(_memory_line(m)) + 1 for m in units)


def _pack(memories: Sequence[dict], room: int, top_k: int, tuning, window_start: int | None
          ) -> tuple[list[dict], int]:
    """The best units, in their ranked order, that fit `room`: at most
    `top_k` memories and `tuning.recall_lines` other units, none whose
    story the window still holds; and how many did not fit."""
    kept, spent = [], tokens.count(MEMORY_HEADER) + 1
    room_left = {"memory": max(1, top_k), "other": tuning.recall_lines}
    unfit = 0
    for memory in memories:
        kind = "memory" if memory.get("unit", "memory") == "memory" else "other"
        if kind == "other" and _inside(memory, window_start):
            continue
        if room_left[kind] <= 0:
            continue
        cost = tokens.count(_memory_line(memory)) + 1
        if spent + cost <= room:
            kept.append(memory)
            spent += cost
            room_left[kind] -= 1
        else:
            unfit += 1
    return kept, unfit


def _inside(unit: dict, window_start: int | None) -> bool:
    """Whether a recalled line or earlier summary stands for story the history
    window still holds. Memories are offered wherever they came from, as
    before: a memory the reader wrote is anchored at the head."""
    start = unit.get("start")
    return (window_start is not None and unit.get("unit", "memory") != "memory" and start is not None
            and start >= window_start)


def _oldest_included(fetched, info: dict) -> int | None:
    """The depth of the oldest story node the history section holds."""
    lines, included = fetched[0], info["included"]
    if not included:
        return None
    return lines[len(lines) - included].depth


_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)]*\s+")


def _within(text: str, room: int) -> str:
    """`text` whole if it fits in `room` tokens, else its opening sentences
    that do (a header line alone is not worth keeping: ""). Always a prefix
    of `text`, quotes after a full stop kept: a held summary is the same
    prefix cut again by length, and must read the same to be reused."""
    if tokens.count(text) <= room:
        return text
    head, _, body = text.partition("\n")
    kept = ""
    for end in _SENTENCE_END.finditer(body):
        candidate = f"{head}\n{body[:end.end()].rstrip()}"
        if tokens.count(candidate) > room:
            break
        kept = candidate
    return kept


def _final_sections(settings, brief: Brief, inputs: Inputs) -> list[tuple[str, str, str]]:
    out = []
    if inputs.state_text.strip():
        out.append(("narrative_state", inputs.state_text, "the authoritative state at the head"))
    hint = length_hint(settings.max_output_tokens, brief.narration_length)
    if hint:
        out.append(("length_hint", hint, "from the reply cap and the campaign's narration length"))
    if inputs.reminder:
        out.append(("reminder", inputs.reminder, "keeps the emit protocol fresh"))
    again = restated(inputs.pending)
    if again:
        out.append(("input_restated", again, "the input once more, last, where a small model heeds it"))
    return out


def _cost(sections) -> int:
    return sum(tokens.count(text) for _, text, _ in sections)


def _ratio(window: Window | None) -> float:
    """The measured server-tokens-per-estimate-token ratio carried by the window (1.0 unmeasured)."""
    ratio = getattr(window, "token_ratio", 1.0) if window is not None else 1.0
    return float(ratio) if isinstance(ratio, int | float) and math.isfinite(ratio) and ratio > 1.0 else 1.0


def _room(budget: int, output: int, safety: int, ratio: float) -> int:
    """The budget in our counter's tokens: the reply cap and the reserve are
    the server's tokens already; the prompt's share is divided by the ratio
    (a tokenizer counting 15% more than cl100k fits 15% less of our text)."""
    if ratio == 1.0:
        return budget
    return output + safety + int(max(0, budget - output - safety) / ratio)


def _overflow(protected, reserved, transport, output, safety, budget, configured, ratio=1.0) -> ContextOverflow:
    message = (f"The protected context needs {protected:,} tokens ({reserved:,} of prompt that may not be "
               f"dropped, {transport:,} of formatting, {output:,} reserved for the reply and a {safety:,}-token "
               f"safety reserve) but the context budget is {budget:,}. ")
    if ratio > 1.0:
        message += (f"This model's tokenizer counts {ratio:.2f}× our estimate, so the prompt's share of the budget "
                    f"holds {_room(budget, output, safety, ratio) - output - safety:,} of our tokens. ")
    if budget < configured:
        message += ("That budget is what the server was found to accept, so raising the setting will not help: "
                    "load the model with a larger window, or lower max_output_tokens, or shorten the campaign's "
                    "canon and instructions.")
    else:
        message += ("Raise the context budget (wb.configure(context_budget=...)), lower max_output_tokens, or "
                    "shorten the campaign's canon and instructions.")
    return ContextOverflow(message)


def _fetch(history: HistorySource, budget: int) -> tuple[list[Line], list[str], list[int]]:
    """The newest lines that could fit, and no more: a long story is never read whole.
    Returned with their rendered texts and token costs (separator included), so
    each line is rendered and priced once per turn.

    After the first read, the next asks for as many lines as the budget holds
    at the cost per line seen so far (a fifth more), rather than doubling: at a
    16k budget doubling took five reads and re-priced ~2,000 lines a turn."""
    n, texts, costs = FIRST_FETCH, [], []
    sep = tokens.count(SEPARATOR)
    while True:
        lines = list(history.newest(n))
        # Each read ends at the head, so what was priced before is its tail.
        older = [render_line(x) for x in lines[: len(lines) - len(texts)]]
        texts = older + texts
        costs = [tokens.count(t) + sep for t in older] + costs
        cost = sum(costs)
        if cost > budget or len(lines) >= history.total or len(lines) < n:
            return lines, texts, costs
        per_line = max(cost / max(len(lines), 1), 1.0)
        n = max(n * 2, int(budget / per_line * 1.2) + 1)


def _window_history(fetched: tuple[list[Line], list[str], list[int]], budget: int, max_output: int,
                    fraction: int, keep_floor: int | None = None) -> tuple[list[str], dict]:
    """The newest lines that fit `budget`, from the block floor on. With
    `keep_floor` (the floor of the prompt whose memories are held) the floor
    never steps back: a history that grew at its start would be read again
    whole, since nothing before it is new."""
    lines, texts, costs = fetched
    sep = tokens.count(SEPARATOR)
    block = trim_block(budget, max_output, fraction) * NODES_PER_TURN if fraction else None
    floor = history_floor([x.depth for x in lines], costs, budget, block) if block else None
    if keep_floor is not None and block and lines and lines[0].depth is not None and keep_floor > lines[0].depth:
        floor = keep_floor if floor is None else max(floor, keep_floor)
    start = 0
    if floor is not None:
        start = next((i for i, x in enumerate(lines) if x.depth >= floor), len(lines))
        if start == len(lines):
            floor, start = None, 0
    chosen, spent, truncated = [], 0, False
    for text, cost in zip(reversed(texts[start:]), reversed(costs[start:]), strict=True):
        if spent + cost > budget:
            if not chosen and budget > sep:  # one oversized newest node: keep its end
                text = tokens.last(text, budget - sep)
                chosen.append(text)
                spent += tokens.count(text) + sep
                truncated = True
            break
        chosen.append(text)
        spent += cost
    chosen.reverse()
    info = {"included": len(chosen), "fetched": len(lines), "oldest_truncated": truncated,
            "floor_depth": floor, "trim_block": block, "spent": spent}
    return chosen, info


def build(brief: Brief, history: HistorySource, settings, window: Window | None, inputs: Inputs | None = None) -> Built:
    inputs = inputs or Inputs()
    configured = settings.context_budget
    budget = effective_budget(configured, window)
    system_sections = _system_sections(settings.narrator_prompt, brief, inputs, budget)
    final = _final_sections(settings, brief, inputs)
    pending = render_line(inputs.pending) if inputs.pending else ""
    note = f"[Author's note: {brief.authors_note}]" if brief.authors_note.strip() else ""
    reserved = (_cost(system_sections) + _cost(final) + tokens.count(pending) + tokens.count(note)
                + tokens.count(inputs.opening))
    transport = tokens.count(SEPARATOR) * (len(system_sections) + STORY_SECTION_SLOTS) + tokens.count(CONTINUE_HINT)
    output, safety = max(0, settings.max_output_tokens), safety_reserve(budget)
    ratio = _ratio(window)
    room = _room(budget, output, safety, ratio)
    protected = reserved + transport + output + safety
    if protected >= room:
        raise _overflow(protected, reserved, transport, output, safety, budget, configured, ratio)
    top_k = getattr(settings, "memory_top_k", 5)
    newest = history.total - 1 if history.total > 0 else None
    live, live_dropped, kept, why, block_keys = _live_sections(inputs, room - protected, settings.tuning, top_k,
                                                                None, newest)
    reserved += _cost(live)
    available = room - protected - _cost(live)
    knowledge_sections, knowledge_report = [], {}
    if inputs.knowledge is not None:
        # knowledge spends at most its share (the search tuning's) of what
        # remains after the protected context, before history is sized
        picked, knowledge_report = inputs.knowledge.select_share(available)
        knowledge_sections = [(label, text, "retrieved: relevant to the recent story") for label, text in picked]
    knowledge_spent = sum(tokens.count(t) + tokens.count(SEPARATOR) for _, t, _ in knowledge_sections)
    history_budget = max(0, available - knowledge_spent)
    held_floor = (inputs.held or {}).get("floor")
    keep_floor = held_floor if why == "held" and isinstance(held_floor, int) else None
    fetched = _fetch(history, history_budget)
    chosen, info = _window_history(fetched, history_budget, output, settings.trim_fraction, keep_floor)
    start = _oldest_included(fetched, info)
    if start is not None and any(_inside(m, start) for m in kept):
        # Recalled story still inside the window: choose again without it, and
        # size the history for what the memories cost now. A history that
        # grows with the room freed drops the units it now holds, unrefilled.
        again, again_dropped, again_kept, why, block_keys = _live_sections(
            inputs, room - protected, settings.tuning, top_k, start, newest)
        history_budget = max(0, history_budget + _cost(live) - _cost(again))
        reserved += _cost(again) - _cost(live)
        live, live_dropped, kept = again, again_dropped, again_kept
        keep_floor = keep_floor if why == "held" else None
        fetched = _fetch(history, history_budget)
        chosen, info = _window_history(fetched, history_budget, output, settings.trim_fraction, keep_floor)
        newer = _oldest_included(fetched, info)
        if newer is not None and newer < start and any(_inside(m, newer) for m in kept):
            # Shown as one new choice (a history that grew back over held units is rare).
            kept = [m for m in kept if not _inside(m, newer)]
            live = [s for s in live if s[0] not in ("memories", "memories_new")]
            why, block_keys = "the history grew back over a held unit", [_unit_key(m) for m in kept]
            if kept:
                live.append(_memory_section("memories", MEMORY_HEADER, kept,
                                            f"{len(kept)} recalled for the input and the recent story"))
    # Where the summary and memories stand: after the node that was newest
    # when they were chosen, so the next prompts repeat them in place.
    block = [s for s in live if s[0] in ("story_summary", "memories")]
    fresh = [s for s in live if s[0] == "memories_new"]
    held = why == "held"
    anchor = inputs.held.get("anchor") if held else newest
    if not block:
        anchor = None
    depths = [x.depth for x in fetched[0][len(fetched[0]) - info["included"]:]] if info["included"] else []
    if note:
        at = max(0, len(chosen) - AUTHORS_NOTE_DEPTH)
        chosen.insert(at, note)
        depths.insert(at, None)
    split = len(chosen)
    if anchor is not None:
        split = next((i for i in range(len(depths), 0, -1)
                      if depths[i - 1] is not None and depths[i - 1] <= anchor), 0)
    older, recent = (chosen[:split], chosen[split:]) if split else (chosen, [])
    recent_nodes = sum(1 for d in depths[split:] if d is not None) if split else 0
    lines_shown = f"newest {info['included']} of {history.total} nodes"
    if block and split:
        # The reminder never changes: beside memories held in place it stands
        # at their end, where the cache keeps it, not after the new content.
        block += [s for s in final if s[0] == "reminder"]
        final = [s for s in final if s[0] != "reminder"]
    if recent:
        story_sections = [("history", SEPARATOR.join(older), lines_shown + ", up to the held memories"), *block,
                          ("history_recent", SEPARATOR.join(recent), f"the {recent_nodes} newest nodes, after them")]
    elif split:
        story_sections = [("history", SEPARATOR.join(older), lines_shown), *block]
    else:
        story_sections = [*block, ("history", SEPARATOR.join(older), lines_shown)]
    if pending:
        story_sections.append(("input", pending, "the reader's input for this turn"))
    story_sections += knowledge_sections + fresh + final
    system = SEPARATOR.join(text for _, text, _ in system_sections)
    story = SEPARATOR.join(text for _, text, _ in story_sections if text)
    # The history changes every turn; its nodes do not: count it by its parts.
    counts = {"history": tokens.count_joined(older, SEPARATOR), "history_recent": tokens.count_joined(recent, SEPARATOR)}
    story_parts = [part for name, text, _ in story_sections if text
                   for part in ({"history": older, "history_recent": recent}.get(name) or [text])]
    total = tokens.count(system) + tokens.count_joined(story_parts, SEPARATOR)
    counted = (total + (tokens.count(CONTINUE_HINT) if settings.api_mode != "completion" else tokens.count(SEPARATOR))
               + tokens.count(inputs.opening))
    estimate = math.ceil(counted * ratio)
    report = Report({
        "builder": "v2",
        "sections": [{"name": n, "part": "system", "tokens": tokens.count(t), "why": w, "text": t}
                     for n, t, w in system_sections]
                    + [{"name": n, "part": "story", "tokens": counts.get(n) if n in counts else tokens.count(t),
                        "why": w, "text": t} for n, t, w in story_sections if t],
        "prompt": {"system": system, "story": story},
        "system": system,
        "story": story,
        "tokens": {"total": total, "budget": budget, "configured_budget": configured, "output_reserve": output,
                   "protected": reserved, "available_for_history": available, "history_spent": info["spent"],
                   "knowledge_spent": knowledge_spent, "transport": transport, "safety_reserve": safety,
                   "estimate": estimate, "estimate_cl100k": counted, "token_ratio": ratio},
        "budget": {"configured": configured, "effective": budget, "reserve": safety, "max_output": output},
        "window": _window_report(window, configured),
        # "recent": the newest nodes, shown after the held memories in a section of their own.
        "history": {**info, "total": history.total, "recent": recent_nodes},
        # What the next prompt needs to hold these memories in place (see _held).
        "held": {"anchor": anchor, "summary": inputs.summary_info.get("id"), "held": held, "why": why,
                 "summary_chars": len(next((t for n, t, _ in live if n == "story_summary"), "")),
                 "units": [list(key) for key in block_keys], "floor": info["floor_depth"]},
        "estimate": estimate,
        "cards": [],
        # Inside the history section (AUTHORS_NOTE_DEPTH lines from its end); counted here too.
        "authors_note": {"tokens": tokens.count(note) if note else 0, "depth": AUTHORS_NOTE_DEPTH if note else None},
        # A recalled line's or summary's text is in the memories section already: a turn
        # record keeping it again stored a new prompt text for each line recalled.
        "memories": {**inputs.memory_report, "candidates": len(inputs.memories),
                     "used": [m if m.get("unit", "memory") == "memory" else {k: v for k, v in m.items() if k != "text"}
                              for m in kept],
                     "dropped_for_budget": [d for d in live_dropped if d["section"] == "memories"]},
        "live_dropped": live_dropped,
        "summary": dict(inputs.summary_info),
        "knowledge": knowledge_report,
        "derived": list(inputs.derived),
        # Its words are in the turn's rules (accounting), the record of what the reply was given.
        "opening": {"tokens": tokens.count(inputs.opening)},
    })
    return Built(system, story, report, inputs.opening)


def _window_report(window: Window | None, configured: int) -> dict:
    if window is None:
        return {"verified": False, "tokens": None, "source": "unknown", "model_max": None,
                "detail": "not checked", "capped": False}
    return {"verified": window.verified, "tokens": window.tokens, "source": window.source,
            "model_max": window.model_max, "detail": window.detail,
            "capped": bool(window.tokens and window.tokens < configured), "preflight": window.preflight,
            "token_ratio": _ratio(window), "ratio_detail": getattr(window, "ratio_detail", ""),
            "changed_from": getattr(window, "changed_from", None)}
