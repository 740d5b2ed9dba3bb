"""The events that change narrative state, and the shape each one must have.

The narrator proposes events; it never edits the document. Every event states
an ABSOLUTE value (who holds the key now, where Mara is now), never a delta,
because a small model that repeats last turn's block must not move the key
twice. `SPECS` is the single table the prompt vocabulary, the shape check and
the validator all read, so the narrator can never be told about an event the
application does not apply.
"""
from __future__ import annotations

import json
from typing import Any

from .model import is_key

__all__ = [
    "EVENT_TYPES",
    "KEY",
    "LABELS",
    "MISSING_FIELD",
    "NOT_AN_EVENT",
    "SPECS",
    "TEXT",
    "UNKNOWN_TYPE",
    "VALUE",
    "WRONG_KIND",
    "fields_of",
    "is_event_type",
    "shape_problem",
    "vocabulary_for_prompt",
]

# Field kinds. Deliberately flat: nothing an event carries needs nesting, and
# a nested structure is somewhere a model could hide anything at all.
KEY = "key"  # a short lower-case slug naming something (see model.KEY_PATTERN)
TEXT = "text"  # non-empty words
VALUE = "value"  # one plain value: words, a number or true/false
LABELS = "labels"  # a list of short words, e.g. the keys present in a scene

# Reasons a shape check gives; the validator adds the ones that need the state.
NOT_AN_EVENT = "not_an_event"
UNKNOWN_TYPE = "unknown_type"
MISSING_FIELD = "missing_field"
WRONG_KIND = "wrong_kind"

# `refs` name the fields that must be keys of existing entities; `present` in
# set_scene is a list of them.
SPECS: dict[str, dict[str, Any]] = {
    "create_entity": {
        "required": {"entity": KEY, "name": TEXT},
        "optional": {"entity_type": TEXT, "description": TEXT, "status": TEXT},
        "refs": (),
        "summary": "someone or something new enters the story",
    },
    "update_entity": {
        "required": {"entity": KEY},
        "optional": {"name": TEXT, "entity_type": TEXT, "status": TEXT, "description": TEXT},
        "refs": ("entity",),
        "summary": "what an existing entity is now called, is, or looks like",
    },
    "set_possession": {
        "required": {"item": KEY, "owner": KEY},
        "optional": {},
        "refs": ("item", "owner"),
        "summary": "the item is now held by the owner",
    },
    "clear_possession": {
        "required": {"item": KEY},
        "optional": {},
        "refs": ("item",),
        "summary": "nobody holds the item any more",
    },
    "set_current_location": {
        "required": {"entity": KEY, "location": KEY},
        "optional": {},
        "refs": ("entity", "location"),
        "summary": "the entity is now at the location",
    },
    "add_fact": {
        "required": {"predicate": TEXT},
        "optional": {"fact_id": KEY, "subject": KEY, "object": KEY, "value": VALUE},
        "refs": ("subject", "object"),
        "summary": "something is now true in the story",
    },
    "withdraw_fact": {
        "required": {"fact_id": KEY, "reason": TEXT},
        "optional": {},
        "refs": (),
        "summary": "an established fact is no longer true, and why",
    },
    "add_relationship": {
        "required": {"source": KEY, "target": KEY, "label": TEXT},
        "optional": {},
        "refs": ("source", "target"),
        "summary": "how one entity now stands towards another",
    },
    "end_relationship": {
        "required": {"source": KEY, "target": KEY},
        "optional": {"label": TEXT, "reason": TEXT},
        "refs": ("source", "target"),
        "summary": "a tie between two entities no longer holds",
    },
    "open_thread": {
        "required": {"thread": KEY, "title": TEXT},
        "optional": {},
        "refs": (),
        "summary": "a question or goal the story now leaves open",
    },
    "close_thread": {
        "required": {"thread": KEY},
        "optional": {"resolution": TEXT},
        "refs": (),
        "summary": "an open thread is settled",
    },
    "set_scene": {
        "required": {"summary": TEXT},
        "optional": {"location": KEY, "present": LABELS},
        "refs": ("location",),
        "summary": "where the story now stands and who is there",
    },
}
EVENT_TYPES = tuple(SPECS)

# Placeholders, never sample identifiers: a vocabulary that named `mara` would
# hand every story a Mara. Lists show as lists so the model sees the shape.
_PLACEHOLDER = {KEY: "…", TEXT: "…", VALUE: "…", LABELS: ["…"]}


def vocabulary_for_prompt(compact: bool = False) -> str:
    """Each event written as the very object the model must send.

    The reference system first used `set_possession(item, owner)` notation, and
    a 3B narrator copied it verbatim into its prose; an object copied into
    prose is a proposal the extractor already removes, a call was not. The
    reference measured ~380 tokens for this form against 456 for a spaced
    `"<key>"` form and 258 for calls; this vocabulary of twelve events counts
    337 cl100k tokens (the whole EMIT_RULE 529), hence compact separators.
    `compact` gives the objects alone, for the short rule (EMIT_RULE_SHORT).
    """
    lines = []
    for name, spec in SPECS.items():
        shape = {"type": name, **{f: _PLACEHOLDER[k] for f, k in spec["required"].items()}}
        if compact:  # the object alone: what the parser needs, for the short rule at small windows
            lines.append(json.dumps(shape, ensure_ascii=False, separators=(",", ":")))
            continue
        line = f"  {json.dumps(shape, ensure_ascii=False, separators=(',', ':'))} — {spec['summary']}"
        if spec["optional"]:
            line += f" (optional: {', '.join(spec['optional'])})"
        lines.append(line)
    return "\n".join(lines)


def is_event_type(name: Any) -> bool:
    return isinstance(name, str) and name in SPECS


def _blank(value: Any) -> bool:
    return value is None or value == [] or (isinstance(value, str) and not value.strip())


def fields_of(event_type: str) -> dict[str, str]:
    spec = SPECS[event_type]
    return {**spec["required"], **spec["optional"]}


def _kind_problem(kind: str, value: Any) -> str | None:
    if kind == KEY:
        return None if is_key(value) else "a short lower-case key such as silver-key"
    if kind == TEXT:
        return None if isinstance(value, str) and value.strip() else "some words"
    if kind == VALUE:
        ok = isinstance(value, str | int | float | bool) and value != ""
        return None if ok else "a single word, number or true/false"
    ok = isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    return None if ok else "a list of words"


def shape_problem(event: Any) -> tuple[str, str] | None:
    """(reason code, words) when the event is malformed before any state is consulted."""
    if not isinstance(event, dict):
        return NOT_AN_EVENT, f"an event must be an object with a type, not {type(event).__name__}"
    kind = event.get("type")
    if not is_event_type(kind):
        return UNKNOWN_TYPE, f"there is no event called {kind!r}; known: {', '.join(EVENT_TYPES)}"
    for field in SPECS[kind]["required"]:
        if _blank(event.get(field)):
            return MISSING_FIELD, f"{kind} needs {field!r}"
    for field, field_kind in fields_of(kind).items():
        if field in event and event[field] is not None:
            wanted = _kind_problem(field_kind, event[field])
            if wanted:
                return WRONG_KIND, f"{kind}.{field} should be {wanted}, got {event[field]!r}"
    return None
