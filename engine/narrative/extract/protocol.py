"""The protocol in words: what the narrator is asked to append, the words of
ours an echo of the prompt is known by, and the name of each kind of removal.

Kept apart from the finders because the prompt builder reads the rule and the
finders read the echoes: the two must never drift apart, and a test holds
every copy equal to the text the prompt really carries.
"""
from __future__ import annotations

from ..events import vocabulary_for_prompt

__all__ = [
    "CONTINUE_HINT_PHRASE",
    "EMIT_REMINDER",
    "EMIT_RULE",
    "EMIT_RULE_SHORT",
    "LENGTH_HINT_OPENING",
    "LENGTH_HINT_TAIL",
    "RESTATED_OPENING",
    "RULES",
    "RULE_DANGLING_JSON",
    "RULE_DANGLING_STATE",
    "RULE_EMPTY_FENCE",
    "RULE_EVENT_CALL",
    "RULE_INLINE_PROPOSAL",
    "RULE_INSTRUCTION_TAIL",
    "RULE_JSON_FENCE",
    "RULE_LEADING_LABEL",
    "RULE_LENGTH_HINT",
    "RULE_PASTED_STATE",
    "RULE_QUOTE_MARKER",
    "RULE_SCENE_LINE",
    "RULE_STATE_FENCE",
    "RULE_STATE_HEADING",
    "RULE_TRAILING_OBJECT",
    "RULE_TRUNCATED_OBJECT",
    "SHORT_RULE_WINDOW",
    "emit_rule",
]

EMIT_RULE = (
    "When the story part is done, append one fenced ```state block holding a JSON object with "
    "an events list that records what this turn made true, and write nothing after it.\n"
    "\n"
    "Every value is ABSOLUTE: say how things stand now, never what changed or by how much. "
    "These are the only events, and each must be written in exactly this form:\n"
    f"{vocabulary_for_prompt()}\n"
    "\n"
    "Keys are short lower-case slugs and must be the keys the state you were shown already "
    "uses; the keys in the example only stand in for real ones. Bring a person, place or "
    "thing in with create_entity before any other event mentions it. When the turn "
    "established nothing, send an empty events list.\n"
    "Example:\n"
    "```state\n"
    '{"events": [{"type": "set_possession", "item": "item-1", "owner": "character-1"}, '
    '{"type": "set_current_location", "entity": "character-1", "location": "location-1"}]}\n'
    "```"
)
# The rule at small windows: the same fence, the same events in the same form,
# the objects alone (the parser needs nothing else). The full rule costs 529
# cl100k tokens, 13 % of the embedded 4,096-token window on every turn.
EMIT_RULE_SHORT = (
    "After the story, append one ```state block holding a JSON object whose events list records what "
    "this turn made true (empty if nothing did), and write nothing after it. Values say how things stand "
    "now. Each event is one of these objects; keys are short lower-case slugs, and create_entity comes "
    "before any other event names something new:\n"
    f"{vocabulary_for_prompt(compact=True)}"
)
# At or below this window the short rule is sent (the full one is 13 % of
# 4,096 tokens and 6 % of 8,192; 3 % of 16,384, where its summaries are kept).
SHORT_RULE_WINDOW = 8192


def emit_rule(window_tokens: int | None) -> str:
    """The protocol rule for a window: short where every token counts."""
    return EMIT_RULE_SHORT if window_tokens and window_tokens <= SHORT_RULE_WINDOW else EMIT_RULE


EMIT_REMINDER = (
    "[Reminder: once the story part is finished, append the ```state block; its events list "
    "holds what this turn established, and stays empty if nothing changed.]"
)

# The length hint's own words. engine/context/length.py builds the hint; these
# copies are what an echo of it is recognised by, and a test holds the two
# equal so they cannot drift apart without a failure.
LENGTH_HINT_OPENING = "[Hard limit:"
LENGTH_HINT_TAIL = "Bring the passage to a close well inside that limit."
# The sentence of CONTINUE_HINT (engine.budget.hints) a narrator parrots back;
# a copy, not an import, so the narrative package imports nothing outside
# itself (a test pins it).
CONTINUE_HINT_PHRASE = "write only its next passage"
# How the builder says the turn's input again, last (engine.context.builder.restated);
# a copy for the same reason, held equal by a test.
RESTATED_OPENING = "[Now:"

# Rule ids, one per kind of removal, so an audit or a replay can say what came
# out of a reply and why.
RULE_STATE_FENCE = "state_fence"
RULE_JSON_FENCE = "json_fence"
RULE_TRAILING_OBJECT = "trailing_object"
RULE_INLINE_PROPOSAL = "inline_proposal"
RULE_EVENT_CALL = "event_call_line"
RULE_PASTED_STATE = "pasted_state_section"
RULE_LENGTH_HINT = "echoed_length_hint"
RULE_INSTRUCTION_TAIL = "echoed_instruction_tail"
RULE_DANGLING_STATE = "dangling_state_fence"
RULE_DANGLING_JSON = "dangling_json_fence"
RULE_TRUNCATED_OBJECT = "truncated_object"
RULE_STATE_HEADING = "trailing_state_heading"
RULE_QUOTE_MARKER = "bare_quote_marker"
RULE_EMPTY_FENCE = "empty_dangling_fence"
RULE_SCENE_LINE = "rendered_scene_line"
RULE_LEADING_LABEL = "leading_label"
RULES = (
    RULE_STATE_FENCE, RULE_JSON_FENCE, RULE_TRAILING_OBJECT, RULE_INLINE_PROPOSAL,
    RULE_EVENT_CALL, RULE_PASTED_STATE, RULE_LENGTH_HINT, RULE_INSTRUCTION_TAIL,
    RULE_DANGLING_STATE, RULE_DANGLING_JSON, RULE_TRUNCATED_OBJECT, RULE_STATE_HEADING,
    RULE_QUOTE_MARKER, RULE_EMPTY_FENCE, RULE_SCENE_LINE, RULE_LEADING_LABEL,
)
