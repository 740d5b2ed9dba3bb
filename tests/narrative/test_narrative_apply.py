import copy
import json
import sys

import pytest

from engine.narrative import describe_diff, diff, empty
from engine.narrative.apply import Outcome, Reason, apply

# The package exports the function `apply`, which hides the module of that name.
applying = sys.modules["engine.narrative.apply"]

AT = {"branch_id": 1, "depth": 4}


def create(key, name, kind="character", **more):
    return {"type": "create_entity", "entity": key, "name": name, "entity_type": kind, **more}


@pytest.fixture
def world():
    events = [create("mara", "Mara"), create("aldric", "Aldric"), create("abbey", "Old Abbey", "location"),
              create("key", "Silver key", "item")]
    return apply(empty(), events, source="narrator").state


def codes(outcome):
    return [reason.code for _, reason in outcome.rejected]


def test_create_entity_fills_defaults(world):
    outcome = apply(world, [{"type": "create_entity", "entity": "gull", "name": " A gull "}], source="narrator")
    assert outcome.state["entities"]["gull"] == {"type": "other", "name": "A gull", "status": "active",
                                                 "description": ""}
    assert outcome.state["entities"]["mara"]["type"] == "character"


def test_apply_never_mutates_its_input(world):
    before = copy.deepcopy(world)
    outcome = apply(world, [{"type": "set_possession", "item": "key", "owner": "mara"}], source="narrator")
    assert world == before and outcome.state is not world
    assert outcome.state["possessions"] == {"key": "mara"}


def test_every_event_applies(world):
    events = [
        {"type": "update_entity", "entity": "mara", "status": "wounded", "entity_type": "Smuggler"},
        {"type": "set_possession", "item": "key", "owner": "mara"},
        {"type": "set_possession", "item": "key", "owner": "aldric"},
        {"type": "set_current_location", "entity": "mara", "location": "abbey"},
        {"type": "add_fact", "fact_id": "vault", "subject": "mara", "predicate": "knows the code", "value": 1234},
        {"type": "add_fact", "predicate": "the bells are silent"},
        {"type": "withdraw_fact", "fact_id": "vault", "reason": "she guessed"},
        {"type": "add_relationship", "source": "mara", "target": "aldric", "label": "trusts"},
        {"type": "add_relationship", "source": "aldric", "target": "mara", "label": "owes"},
        {"type": "end_relationship", "source": "aldric", "target": "mara", "reason": "paid"},
        {"type": "open_thread", "thread": "who-rang", "title": "Who rang the bells?"},
        {"type": "open_thread", "thread": "the-debt", "title": "The debt"},
        {"type": "close_thread", "thread": "the-debt", "resolution": "paid in full"},
        {"type": "set_scene", "summary": "Night in the nave", "location": "abbey", "present": ["mara", "mara"]},
        {"type": "clear_possession", "item": "key"},
    ]
    outcome = apply(world, events, source="narrator", at=AT)
    state = outcome.state
    assert outcome.rejected == [] and len(outcome.accepted) == len(events)
    assert state["entities"]["mara"] == {"type": "smuggler", "name": "Mara", "status": "wounded",
                                              "description": "", "location": "abbey"}
    assert state["possessions"] == {}
    vault, bells = state["facts"]
    assert vault["status"] == "withdrawn" and vault["invalidated_reason"] == "she guessed"
    assert bells["id"] == "fact-2" and bells["status"] == "active" and bells["at"] == AT
    assert [(r["label"], r["status"]) for r in state["relationships"]] == [("trusts", "active"), ("owes", "ended")]
    assert state["threads"]["the-debt"] == {"title": "The debt", "status": "closed", "resolution": "paid in full"}
    assert state["scene"] == {"summary": "Night in the nave", "location": "abbey", "present": ["mara"], "at": AT}
    json.dumps(state)  # the document stays plain JSON


def test_accepted_events_carry_their_source_and_position(world):
    narrated = apply(world, [{"type": "clear_possession", "item": "key", "noise": 1}], source="narrator", at=AT)
    assert narrated.accepted == [{"event": {"type": "clear_possession", "item": "key"},
                                  "source": "narrator", "at": AT}]
    corrected = apply(world, [{"type": "clear_possession", "item": "key"}], source="correction")
    assert corrected.accepted == [{"event": {"type": "clear_possession", "item": "key"}, "source": "correction"}]
    with pytest.raises(ValueError):
        apply(world, [], source="the moon")


@pytest.mark.parametrize(
    "event, code, words",
    [
        ({"type": "teleport", "entity": "mara"}, "unknown_type", "teleport"),
        ("set_possession(key, mara)", "not_an_event", "object"),
        ({"type": "set_possession", "item": "key"}, "missing_field", "owner"),
        ({"type": "set_possession", "item": "key", "owner": "Mara Smith"}, "wrong_kind", "owner"),
        ({"type": "set_possession", "item": "key", "owner": "nobody"}, applying.UNKNOWN_REFERENCE, "nobody"),
        ({"type": "set_scene", "summary": "Hall", "location": "nowhere", "present": ["mara"]},
         applying.UNKNOWN_REFERENCE, "nowhere"),
        ({"type": "set_scene", "summary": "Hall", "present": ["mara", "ghost"]}, applying.UNKNOWN_REFERENCE, "ghost"),
        ({"type": "add_fact", "predicate": "sees", "subject": "ghost"}, applying.UNKNOWN_REFERENCE, "ghost"),
        (create("mara", "Another Mara"), applying.DUPLICATE_ENTITY, "mara"),
        ({"type": "update_entity", "entity": "mara"}, applying.NOTHING_TO_CHANGE, "update_entity"),
        ({"type": "set_possession", "item": "key", "owner": "key"}, applying.SELF_REFERENCE, "key"),
        ({"type": "set_current_location", "entity": "abbey", "location": "abbey"}, applying.SELF_REFERENCE, "abbey"),
        ({"type": "withdraw_fact", "fact_id": "never", "reason": "x"}, applying.UNKNOWN_FACT, "never"),
        ({"type": "end_relationship", "source": "mara", "target": "aldric"}, applying.UNKNOWN_RELATIONSHIP, "mara"),
        ({"type": "close_thread", "thread": "nothing"}, applying.UNKNOWN_THREAD, "nothing"),
    ],
)
def test_rejections_say_why_and_change_nothing(world, event, code, words):
    outcome = apply(world, [event], source="correction")
    assert outcome.accepted == [] and outcome.state == world
    [(rejected, reason)] = outcome.rejected
    assert rejected is event and reason.code == code and words in reason
    assert isinstance(reason, str) and json.loads(json.dumps(reason)) == str(reason)


def test_a_repeated_fact_id_is_refused(world):
    first = apply(world, [{"type": "add_fact", "fact_id": "vault", "predicate": "p"}], source="narrator")
    again = apply(first.state, [{"type": "add_fact", "fact_id": "vault", "predicate": "q"}], source="narrator")
    assert codes(again) == [applying.DUPLICATE_FACT]


def test_partial_application_keeps_the_good_events():
    events = [
        create("mara", "Mara"),
        {"type": "set_scene", "summary": "In the hall.", "location": "nowhere", "present": ["mara"]},
        {"type": "set_possession", "item": "key", "owner": "mara"},
        create("key", "Key", "item"),
        {"type": "set_possession", "item": "key", "owner": "mara"},
    ]
    outcome = apply(empty(), events, source="correction")
    assert "mara" in outcome.state["entities"] and outcome.state["scene"] == {}
    assert outcome.state["possessions"] == {"key": "mara"}  # created earlier in the same batch
    assert [e["event"]["type"] for e in outcome.accepted] == ["create_entity", "create_entity", "set_possession"]
    assert [(e["type"], r.code) for e, r in outcome.rejected] == [
        ("set_scene", applying.UNKNOWN_REFERENCE), ("set_possession", applying.UNKNOWN_REFERENCE)]


def test_a_wholly_refused_batch_leaves_the_document_byte_identical(world):
    outcome = apply(world, [{"type": "teleport"}, {"type": "set_possession", "item": "x", "owner": "y"}],
                    source="correction")
    assert outcome.accepted == [] and len(outcome.rejected) == 2
    assert json.dumps(outcome.state, sort_keys=True) == json.dumps(world, sort_keys=True)


def test_shared_display_names_are_allowed_only_keys_must_differ():
    outcome = apply(empty(), [create("alice_1", "Alice"), create("alice_2", "Alice"), create("alice_1", "Al")],
                    source="correction")
    assert set(outcome.state["entities"]) == {"alice_1", "alice_2"}
    assert codes(outcome) == [applying.DUPLICATE_ENTITY]


def test_absolute_values_make_repeats_harmless(world):
    events = [
        {"type": "set_possession", "item": "key", "owner": "mara"},
        {"type": "add_fact", "predicate": "the bells are silent"},
        {"type": "add_relationship", "source": "mara", "target": "aldric", "label": "trusts"},
    ]
    once = apply(world, events, source="narrator").state
    twice = apply(once, events, source="narrator")
    assert twice.state == once and twice.rejected == []


def test_none_or_a_single_event_are_accepted_as_input(world):
    assert apply(world, None, source="narrator") == Outcome(world, [], [])
    single = apply(world, {"type": "clear_possession", "item": "key"}, source="narrator")
    assert len(single.accepted) == 1


def test_apply_repairs_a_malformed_document():
    outcome = apply({"entities": "junk", "facts": None}, [create("mara", "Mara")], source="narrator")
    assert set(outcome.state) == set(empty()) and "mara" in outcome.state["entities"]


def test_reason_is_a_string_with_a_code():
    reason = Reason("unknown_reference", "words")
    assert reason == "words" and reason.code == "unknown_reference"


# ------------------------------------------------------------ diff

def test_diff_of_identical_states_is_empty(world):
    assert diff(world, copy.deepcopy(world)) == {} and describe_diff({}) == []
    assert diff(None, "junk") == {}


def test_diff_reports_what_changed(world):
    first = apply(world, [
        {"type": "set_possession", "item": "key", "owner": "mara"},
        {"type": "add_fact", "fact_id": "vault", "predicate": "knows the code", "subject": "mara"},
        {"type": "add_relationship", "source": "mara", "target": "aldric", "label": "trusts"},
        {"type": "open_thread", "thread": "who-rang", "title": "Who rang?"},
    ], source="narrator").state
    second = apply(first, [
        create("gull", "Gull", "creature"),
        {"type": "update_entity", "entity": "mara", "status": "asleep"},
        {"type": "set_possession", "item": "key", "owner": "aldric"},
        {"type": "withdraw_fact", "fact_id": "vault", "reason": "a lie"},
        {"type": "add_fact", "predicate": "it rains"},
        {"type": "end_relationship", "source": "mara", "target": "aldric"},
        {"type": "close_thread", "thread": "who-rang"},
        {"type": "set_scene", "summary": "Rain", "location": "abbey"},
    ], source="narrator").state
    changes = diff(first, second)
    assert list(changes["entities"]["added"]) == ["gull"]
    assert changes["entities"]["changed"]["mara"]["after"]["status"] == "asleep"
    assert changes["possessions"] == {"changed": {"key": {"before": "mara", "after": "aldric"}}}
    assert [f["id"] for f in changes["facts"]["withdrawn"]] == ["vault"]
    assert [f["predicate"] for f in changes["facts"]["added"]] == ["it rains"]
    assert [t["label"] for t in changes["relationships"]["ended"]] == ["trusts"]
    assert changes["threads"]["changed"]["who-rang"]["after"]["status"] == "closed"
    assert changes["scene"]["after"]["summary"] == "Rain"
    lines = describe_diff(changes)
    for expected in ("New: Gull (gull, creature)", "mara: status active → asleep", "key passed from mara to aldric",
                     "No longer true: mara knows the code (a lie)", "Established: it rains",
                     "Ended: mara — trusts — aldric", "Closed: who-rang", "Scene: Rain (at abbey)"):
        assert expected in lines, expected


def test_diff_notices_removals_and_restorations(world):
    held = apply(world, [{"type": "set_possession", "item": "key", "owner": "mara"},
                         {"type": "add_fact", "fact_id": "f", "predicate": "p"},
                         {"type": "withdraw_fact", "fact_id": "f", "reason": "r"}], source="narrator").state
    restored = copy.deepcopy(held)
    restored["facts"][0] = {"id": "f", "predicate": "p", "status": "active"}
    restored["possessions"] = {}
    del restored["entities"]["aldric"]
    changes = diff(held, restored)
    assert changes["possessions"] == {"removed": {"key": "mara"}}
    assert [f["id"] for f in changes["facts"]["restored"]] == ["f"]
    assert list(changes["entities"]["removed"]) == ["aldric"]
    lines = describe_diff(changes)
    assert "Nobody holds key any more (was mara)" in lines and "True again: p" in lines
