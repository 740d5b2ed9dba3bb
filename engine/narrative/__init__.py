"""The authoritative narrative state, as pure Python: no database, no network.

    from engine.narrative import split, apply, render_state
    found = split(reply)                       # prose, proposed events, removals
    outcome = apply(state, found.events, source="narrator")
    prompt_section = render_state(outcome.state)

The pipeline is reply -> `split` -> `apply` (validated against the state at
the head; good events applied, bad ones rejected with a reason) -> the new
document plus `diff(before, after)` as the turn's change summary.
"""
from .apply import Outcome, Reason, apply, describe_diff, diff
from .events import SPECS, vocabulary_for_prompt
from .extract import EMIT_REMINDER, EMIT_RULE, EMIT_RULE_SHORT, Extraction, emit_rule, split
from .leaks import count_leaks
from .model import (
    active_facts,
    active_relationships,
    duplicate_names,
    empty,
    entities_of_type,
    entity,
    entity_name,
    open_threads,
    owner_of,
    withdrawn_facts,
)
from .prose import (
    cut_to_sentence,
    drop_copied,
    ends_at_sentence,
    first_person,
    hold_rules,
    named_things,
    reply_opening,
    second_person,
    steer_words,
    takes_up,
)
from .render import render_state

__all__ = [
    "EMIT_REMINDER",
    "EMIT_RULE",
    "EMIT_RULE_SHORT",
    "SPECS",
    "Extraction",
    "Outcome",
    "Reason",
    "active_facts",
    "active_relationships",
    "apply",
    "count_leaks",
    "cut_to_sentence",
    "drop_copied",
    "ends_at_sentence",
    "first_person",
    "emit_rule",
    "hold_rules",
    "named_things",
    "reply_opening",
    "second_person",
    "describe_diff",
    "diff",
    "duplicate_names",
    "empty",
    "entities_of_type",
    "entity",
    "entity_name",
    "open_threads",
    "owner_of",
    "render_state",
    "split",
    "steer_words",
    "takes_up",
    "vocabulary_for_prompt",
    "withdrawn_facts",
]
