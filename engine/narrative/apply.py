"""Checking proposed events against the state, and applying the ones that hold.

Partial application is deliberate: one bad reference must not throw away three
good changes, so each event stands or falls alone, in order (an entity created
earlier in a batch can be named later in it). A rejected event never touches
the document, and a rejection is never silent: it comes back with its reason
in words. Only this module writes the state document.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import model
from .events import SPECS, shape_problem

__all__ = [
    "DUPLICATE_ENTITY",
    "DUPLICATE_FACT",
    "NOTHING_TO_CHANGE",
    "SELF_REFERENCE",
    "SOURCES",
    "UNKNOWN_FACT",
    "UNKNOWN_REFERENCE",
    "UNKNOWN_RELATIONSHIP",
    "UNKNOWN_THREAD",
    "Outcome",
    "Reason",
    "apply",
    "describe_diff",
    "diff",
]

# Who proposed the events. A correction is the reader overruling the story.
SOURCES = ("narrator", "correction")

UNKNOWN_REFERENCE = "unknown_reference"
DUPLICATE_ENTITY = "duplicate_entity"  # a repeated key only; shared names are allowed
DUPLICATE_FACT = "duplicate_fact"
UNKNOWN_FACT = "unknown_fact"
UNKNOWN_RELATIONSHIP = "unknown_relationship"
UNKNOWN_THREAD = "unknown_thread"
SELF_REFERENCE = "self_reference"
NOTHING_TO_CHANGE = "nothing_to_change"


class Reason(str):
    """A rejection in words, carrying a `code` a program can branch on.

    A `str`, so `(event, reason)` pairs print, compare and serialise as plain
    text, while a correction endpoint can still answer `unknown_reference`.
    """

    code: str

    def __new__(cls, code: str, words: str) -> Reason:
        reason = super().__new__(cls, words)
        reason.code = code
        return reason


@dataclass(frozen=True)
class Outcome:
    state: dict
    accepted: list[dict]  # {"event": cleaned event, "source": ..., "at": ... when given}
    rejected: list[tuple[Any, Reason]]


def apply(state: Any, events: Any, *, source: str, at: Any = None) -> Outcome:
    """A new document with the acceptable events applied; `state` is left as it was."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
    document = model.normalised(state)
    accepted, rejected = [], []
    for event in _as_list(events):
        reason = _problem(document, event)
        if reason is not None:
            rejected.append((event, reason))
            continue
        clean = _cleaned(event)
        _APPLY[clean["type"]](document, clean, at)
        accepted.append({"event": clean, "source": source, **({"at": at} if at is not None else {})})
    return Outcome(document, accepted, rejected)


def _as_list(events: Any) -> list:
    if events is None:
        return []
    return list(events) if isinstance(events, list | tuple) else [events]


def _cleaned(event: dict) -> dict:
    """Only the fields the event defines, text stripped; unknown keys are dropped."""
    spec = SPECS[event["type"]]
    clean = {"type": event["type"]}
    for name in [*spec["required"], *spec["optional"]]:
        value = event.get(name)
        if value is not None:
            clean[name] = value.strip() if isinstance(value, str) else value
    return clean


# ------------------------------------------------------------ validation

def _problem(document: dict, event: Any) -> Reason | None:
    shape = shape_problem(event)
    if shape is not None:
        return Reason(*shape)
    return _missing_reference(document, event) or _CHECKS.get(event["type"], _fine)(document, event)


def _fine(document: dict, event: dict) -> None:
    return None


def _missing_reference(document: dict, event: dict) -> Reason | None:
    spec = SPECS[event["type"]]
    named = [(f, event[f]) for f in spec["refs"] if event.get(f) is not None]
    if event["type"] == "set_scene":
        named += [("present", key) for key in event.get("present") or []]
    for field, key in named:
        if key not in document["entities"]:
            return Reason(UNKNOWN_REFERENCE, f"{event['type']}.{field} names {key!r}, which is not an "
                                             f"entity yet; introduce it with create_entity first")
    return None


def _check_create(document: dict, event: dict) -> Reason | None:
    if event["entity"] in document["entities"]:
        return Reason(DUPLICATE_ENTITY, f"the key {event['entity']!r} is already taken; "
                                        f"use update_entity, or a new key for a different entity")
    return None


def _check_update(document: dict, event: dict) -> Reason | None:
    if not any(event.get(name) is not None for name in SPECS["update_entity"]["optional"]):
        return Reason(NOTHING_TO_CHANGE, "update_entity names no field to change")
    return None


def _not_itself(first: str, second: str) -> Callable[[dict, dict], Reason | None]:
    def check(document: dict, event: dict) -> Reason | None:
        if event[first] == event[second]:
            return Reason(SELF_REFERENCE, f"{event['type']} cannot relate {event[first]!r} to itself")
        return None
    return check


def _fact_with_id(document: dict, fact_id: str) -> dict | None:
    return next((f for f in document["facts"] if isinstance(f, dict) and f.get("id") == fact_id), None)


def _check_add_fact(document: dict, event: dict) -> Reason | None:
    if event.get("fact_id") and _fact_with_id(document, event["fact_id"]) is not None:
        return Reason(DUPLICATE_FACT, f"a fact with id {event['fact_id']!r} already exists; "
                                      f"withdraw it, or use a new id")
    return None


def _check_withdraw(document: dict, event: dict) -> Reason | None:
    if _fact_with_id(document, event["fact_id"]) is None:
        return Reason(UNKNOWN_FACT, f"there is no fact with id {event['fact_id']!r} to withdraw")
    return None


def _ties(document: dict, event: dict) -> list[dict]:
    label = (event.get("label") or "").casefold()
    return [
        r for r in model.active_relationships(document)
        if r.get("source") == event["source"] and r.get("target") == event["target"]
        and (not label or str(r.get("label", "")).casefold() == label)
    ]


def _check_end_relationship(document: dict, event: dict) -> Reason | None:
    if not _ties(document, event):
        return Reason(UNKNOWN_RELATIONSHIP, f"nothing ties {event['source']!r} to {event['target']!r}"
                                            + (f" as {event['label']!r}" if event.get("label") else ""))
    return None


def _check_close_thread(document: dict, event: dict) -> Reason | None:
    if event["thread"] not in document["threads"]:
        return Reason(UNKNOWN_THREAD, f"there is no thread {event['thread']!r} to close")
    return None


_CHECKS: dict[str, Callable[[dict, dict], Reason | None]] = {
    "create_entity": _check_create,
    "update_entity": _check_update,
    "set_possession": _not_itself("item", "owner"),
    "set_current_location": _not_itself("entity", "location"),
    "add_relationship": _not_itself("source", "target"),
    "add_fact": _check_add_fact,
    "withdraw_fact": _check_withdraw,
    "end_relationship": _check_end_relationship,
    "close_thread": _check_close_thread,
}


# ------------------------------------------------------------ application
# Every applier states an absolute value, so applying the same event twice
# leaves the document as applying it once did.

def _create(document: dict, event: dict, at: Any) -> None:
    document["entities"][event["entity"]] = {
        "type": (event.get("entity_type") or model.DEFAULT_TYPE).lower(),
        "name": event["name"],
        "status": event.get("status") or model.DEFAULT_STATUS,
        "description": event.get("description") or "",
    }


def _update(document: dict, event: dict, at: Any) -> None:
    found = document["entities"][event["entity"]]
    renames = {"entity_type": "type"}
    for name in SPECS["update_entity"]["optional"]:
        if event.get(name) is not None:
            found[renames.get(name, name)] = event[name].lower() if name == "entity_type" else event[name]


def _set_possession(document: dict, event: dict, at: Any) -> None:
    document["possessions"][event["item"]] = event["owner"]


def _clear_possession(document: dict, event: dict, at: Any) -> None:
    document["possessions"].pop(event["item"], None)


def _set_location(document: dict, event: dict, at: Any) -> None:
    document["entities"][event["entity"]]["location"] = event["location"]


_FACT_FIELDS = ("subject", "predicate", "object", "value")


def _add_fact(document: dict, event: dict, at: Any) -> None:
    content = {name: event[name] for name in _FACT_FIELDS if name in event}
    if not event.get("fact_id") and any(
        {n: f.get(n) for n in _FACT_FIELDS if n in f} == content for f in model.active_facts(document)
    ):
        return  # the narrator restated a fact already held
    fact = {"id": event.get("fact_id") or _new_fact_id(document), **content, "status": "active"}
    document["facts"].append({**fact, **({"at": at} if at is not None else {})})


def _new_fact_id(document: dict) -> str:
    number = len(document["facts"]) + 1
    while _fact_with_id(document, f"fact-{number}") is not None:
        number += 1
    return f"fact-{number}"


def _withdraw_fact(document: dict, event: dict, at: Any) -> None:
    fact = _fact_with_id(document, event["fact_id"])
    if fact.get("status") != "withdrawn":
        fact.update(status="withdrawn", invalidated_reason=event["reason"])


def _add_relationship(document: dict, event: dict, at: Any) -> None:
    if not _ties(document, event):
        document["relationships"].append(
            {"source": event["source"], "target": event["target"], "label": event["label"], "status": "active"})


def _end_relationship(document: dict, event: dict, at: Any) -> None:
    for tie in _ties(document, event):
        tie.update(status="ended", **({"ended_reason": event["reason"]} if event.get("reason") else {}))


def _open_thread(document: dict, event: dict, at: Any) -> None:
    document["threads"][event["thread"]] = {"title": event["title"], "status": "open"}


def _close_thread(document: dict, event: dict, at: Any) -> None:
    thread = document["threads"][event["thread"]]
    thread["status"] = "closed"
    if event.get("resolution"):
        thread["resolution"] = event["resolution"]


def _set_scene(document: dict, event: dict, at: Any) -> None:
    scene = {"summary": event["summary"], "location": event.get("location"),
             "present": list(dict.fromkeys(event.get("present") or []))}
    document["scene"] = {**scene, **({"at": at} if at is not None else {})}


_APPLY: dict[str, Callable[[dict, dict, Any], None]] = {
    "create_entity": _create,
    "update_entity": _update,
    "set_possession": _set_possession,
    "clear_possession": _clear_possession,
    "set_current_location": _set_location,
    "add_fact": _add_fact,
    "withdraw_fact": _withdraw_fact,
    "add_relationship": _add_relationship,
    "end_relationship": _end_relationship,
    "open_thread": _open_thread,
    "close_thread": _close_thread,
    "set_scene": _set_scene,
}
assert set(_APPLY) == set(SPECS), "every event in SPECS needs an applier"


# ------------------------------------------------------------ what changed

def diff(before: Any, after: Any) -> dict:
    """What a turn changed, stored as its change summary; `{}` when nothing did."""
    old, new = model.normalised(before), model.normalised(after)
    parts = {
        "entities": _keyed(old["entities"], new["entities"]),
        "possessions": _keyed(old["possessions"], new["possessions"]),
        "facts": _facts(old, new),
        "relationships": _relationships(old, new),
        "threads": _keyed(old["threads"], new["threads"]),
        "scene": {"before": old["scene"], "after": new["scene"]} if old["scene"] != new["scene"] else {},
    }
    return {name: part for name, part in parts.items() if part}


def _keyed(old: dict, new: dict) -> dict:
    parts = {
        "added": {k: v for k, v in new.items() if k not in old},
        "removed": {k: v for k, v in old.items() if k not in new},
        "changed": {k: {"before": old[k], "after": v} for k, v in new.items() if k in old and old[k] != v},
    }
    return {name: part for name, part in parts.items() if part}


def _fact_index(document: dict) -> dict:
    return {f.get("id") or f"#{i}": f for i, f in enumerate(document["facts"]) if isinstance(f, dict)}


def _facts(old: dict, new: dict) -> dict:
    before, after = _fact_index(old), _fact_index(new)
    kept = [(before[k], f) for k, f in after.items() if k in before]
    parts = {
        "added": [f for k, f in after.items() if k not in before],
        "removed": [f for k, f in before.items() if k not in after],
        "withdrawn": [f for was, f in kept if model.is_withdrawn(f) and not model.is_withdrawn(was)],
        "restored": [f for was, f in kept if model.is_withdrawn(was) and not model.is_withdrawn(f)],
    }
    return {name: part for name, part in parts.items() if part}


def _tie_key(tie: dict) -> tuple:
    return tie.get("source"), tie.get("target"), str(tie.get("label", "")).casefold()


def _relationships(old: dict, new: dict) -> dict:
    before = {_tie_key(t): t for t in model.active_relationships(old)}
    after = {_tie_key(t): t for t in model.active_relationships(new)}
    parts = {
        "added": [t for k, t in after.items() if k not in before],
        "ended": [t for k, t in before.items() if k not in after],
    }
    return {name: part for name, part in parts.items() if part}


def describe_diff(changes: dict) -> list[str]:
    """One plain line per change, for a turn's record and the state panel."""
    lines: list[str] = []
    for section, describe in _DESCRIBERS:
        lines += describe(changes.get(section) or {})
    return lines


def _describe_entities(part: dict) -> list[str]:
    lines = [f"New: {e.get('name') or k} ({k}, {e.get('type') or model.DEFAULT_TYPE})"
             for k, e in part.get("added", {}).items()]
    for key, change in part.get("changed", {}).items():
        old, new = change["before"], change["after"]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                lines.append(f"{key}: {name} {old.get(name) or '(none)'} → {new.get(name) or '(none)'}")
    return lines + [f"No longer in the story's state: {k}" for k in part.get("removed", {})]


def _describe_possessions(part: dict) -> list[str]:
    return (
        [f"{item} is now held by {owner}" for item, owner in part.get("added", {}).items()]
        + [f"{item} passed from {c['before']} to {c['after']}" for item, c in part.get("changed", {}).items()]
        + [f"Nobody holds {item} any more (was {owner})" for item, owner in part.get("removed", {}).items()]
    )


def _fact_words(fact: dict) -> str:
    words = " ".join(str(fact[n]) for n in ("subject", "predicate", "object") if fact.get(n))
    return words + (f": {fact['value']}" if fact.get("value") not in (None, "") else "")


def _describe_facts(part: dict) -> list[str]:
    return (
        [f"{'Recorded as no longer true' if model.is_withdrawn(f) else 'Established'}: {_fact_words(f)}"
         for f in part.get("added", [])]
        + [f"No longer true: {_fact_words(f)} ({f.get('invalidated_reason') or 'withdrawn'})"
           for f in part.get("withdrawn", [])]
        + [f"True again: {_fact_words(f)}" for f in part.get("restored", [])]
        + [f"Fact removed: {_fact_words(f)}" for f in part.get("removed", [])]
    )


def _describe_relationships(part: dict) -> list[str]:
    def tie(t: dict) -> str:
        return f"{t.get('source')} — {t.get('label')} — {t.get('target')}"
    return [f"Now: {tie(t)}" for t in part.get("added", [])] + [f"Ended: {tie(t)}" for t in part.get("ended", [])]


def _describe_threads(part: dict) -> list[str]:
    lines = [f"Opened: {k} — {t.get('title', k)}" for k, t in part.get("added", {}).items()]
    for key, change in part.get("changed", {}).items():
        status = change["after"].get("status", "open")
        lines.append(f"Closed: {key}" if status == "closed" else f"Open again or retitled: {key}")
    return lines + [f"Thread removed: {k}" for k in part.get("removed", {})]


def _describe_scene(part: dict) -> list[str]:
    if not part:
        return []
    scene = part["after"] or {}
    where = f" (at {scene['location']})" if scene.get("location") else ""
    return [f"Scene: {scene.get('summary') or '(cleared)'}{where}"]


_DESCRIBERS = (
    ("entities", _describe_entities),
    ("possessions", _describe_possessions),
    ("facts", _describe_facts),
    ("relationships", _describe_relationships),
    ("threads", _describe_threads),
    ("scene", _describe_scene),
)
