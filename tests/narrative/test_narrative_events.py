import json
import re

import pytest

from engine.narrative import events
from engine.narrative.events import KEY, LABELS, SPECS, TEXT, VALUE, shape_problem, vocabulary_for_prompt

REQUIRED_EVENTS = {
    "create_entity", "update_entity", "set_possession", "clear_possession", "set_current_location",
    "add_fact", "withdraw_fact", "add_relationship", "end_relationship", "open_thread",
    "close_thread", "set_scene",
}


def test_specs_cover_the_vocabulary_with_flat_kinds():
    assert REQUIRED_EVENTS <= set(SPECS)
    for spec in SPECS.values():
        assert set(spec) >= {"required", "optional", "summary", "refs"}
        kinds = {**spec["required"], **spec["optional"]}.values()
        assert set(kinds) <= {KEY, TEXT, VALUE, LABELS}
        assert set(spec["refs"]) <= set(spec["required"]) | set(spec["optional"])


def test_vocabulary_lines_are_the_objects_themselves():
    lines = vocabulary_for_prompt().splitlines()
    assert len(lines) == len(SPECS)
    for line, (name, spec) in zip(lines, SPECS.items(), strict=True):
        body, _, rest = line.strip().partition(" — ")
        shape = json.loads(body)
        assert shape["type"] == name
        assert set(shape) - {"type"} == set(spec["required"])
        assert all(v in ("…", ["…"]) for k, v in shape.items() if k != "type")
        assert rest.startswith(spec["summary"])
        assert ("(optional: " in rest) == bool(spec["optional"])
        assert ", " not in body and ": " not in body  # compact separators
        assert not re.search(r"\w\(", line), "call notation was copied into prose by a 3B model"


def test_vocabulary_shows_lists_as_lists():
    assert '"present"' not in vocabulary_for_prompt()  # optional fields are named, not shaped
    assert '{"type":"set_possession","item":"…","owner":"…"}' in vocabulary_for_prompt()


@pytest.mark.parametrize(
    "event, code",
    [
        ("set_possession(a, b)", events.NOT_AN_EVENT),
        ({"item": "a"}, events.UNKNOWN_TYPE),
        ({"type": "teleport"}, events.UNKNOWN_TYPE),
        ({"type": "set_possession", "item": "key"}, events.MISSING_FIELD),
        ({"type": "add_fact", "predicate": "   "}, events.MISSING_FIELD),
        ({"type": "set_possession", "item": "Silver Key", "owner": "mara"}, events.WRONG_KIND),
        ({"type": "create_entity", "entity": "mara", "name": ["Mara"]}, events.WRONG_KIND),
        ({"type": "add_fact", "predicate": "p", "value": {"nested": 1}}, events.WRONG_KIND),
        ({"type": "set_scene", "summary": "s", "present": "mara"}, events.WRONG_KIND),
    ],
)
def test_shape_problems_are_named_and_worded(event, code):
    found, words = shape_problem(event)
    assert found == code and words


@pytest.mark.parametrize(
    "event",
    [
        {"type": "set_possession", "item": "key", "owner": "mara"},
        {"type": "add_fact", "predicate": "p", "value": 3},
        {"type": "add_fact", "predicate": "p", "value": False, "subject": None},
        {"type": "set_scene", "summary": "s", "present": []},
        {"type": "create_entity", "entity": "mara", "name": "Mara", "extra": {"ignored": True}},
    ],
)
def test_well_shaped_events_pass(event):
    assert shape_problem(event) is None


def test_the_vocabulary_stays_cheap():
    from engine.context import tokens

    assert tokens.count(vocabulary_for_prompt()) < 400  # 337 cl100k tokens for twelve events
