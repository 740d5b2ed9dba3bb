"""The narrative state document: what the story has established, as plain JSON.

Genre-neutral on purpose: a sea cave, a starship and a courtroom all reduce to
entities with a type, who holds what, facts that hold or were withdrawn, ties
between entities, open threads and the current scene. The document lives on
every story node as a snapshot, so it must stay JSON and must survive being
read back from a file written by an older or broken build: every reader here
accepts anything and never mutates what it was given.
"""
from __future__ import annotations

import copy
import re
from typing import Any

__all__ = [
    "DEFAULT_STATUS",
    "DEFAULT_TYPE",
    "KEY_PATTERN",
    "SECTIONS",
    "active_facts",
    "active_relationships",
    "duplicate_names",
    "empty",
    "entities_of_type",
    "entity",
    "entity_name",
    "is_key",
    "is_withdrawn",
    "normalised",
    "open_threads",
    "owner_of",
    "withdrawn_facts",
]

DEFAULT_TYPE = "other"
DEFAULT_STATUS = "active"
# Slugs such as `mara`, `silver-key`, `alice_2`. Capped at 64 characters: a
# key is repeated in every reference the narrator writes, and a longer one is a
# sentence the model mistook for an identifier, not a name.
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

# Each section and the empty value it must have; `normalised` repairs by these.
SECTIONS: dict[str, type] = {
    "entities": dict,
    "possessions": dict,
    "facts": list,
    "relationships": list,
    "threads": dict,
    "scene": dict,
}


def empty() -> dict:
    return {name: kind() for name, kind in SECTIONS.items()}


def is_key(value: Any) -> bool:
    return isinstance(value, str) and KEY_PATTERN.fullmatch(value) is not None


def normalised(state: Any) -> dict:
    """A deep copy with every section present and of the right kind.

    Snapshots come back from disk, from bundles and from hand edits; a section
    of the wrong kind is replaced by an empty one rather than trusted, so the
    renderer and the validator never meet a surprise.
    """
    document = empty()
    if not isinstance(state, dict):
        return document
    for name, kind in SECTIONS.items():
        value = state.get(name)
        if isinstance(value, kind):
            document[name] = copy.deepcopy(value)
    return document


def _section(state: Any, name: str):
    value = state.get(name) if isinstance(state, dict) else None
    return value if isinstance(value, SECTIONS[name]) else SECTIONS[name]()


def entity(state: Any, key: str) -> dict | None:
    found = _section(state, "entities").get(key)
    return found if isinstance(found, dict) else None


def entity_name(state: Any, key: str) -> str:
    """The display name, or the key itself, so a prompt line never reads 'None'."""
    found = entity(state, key)
    name = str(found.get("name") or "").strip() if found else ""
    return name or str(key)


def entities_of_type(state: Any, wanted: str) -> dict:
    return {
        key: value
        for key, value in _section(state, "entities").items()
        if isinstance(value, dict) and (value.get("type") or DEFAULT_TYPE) == wanted
    }


def owner_of(state: Any, item_key: str) -> str | None:
    holder = _section(state, "possessions").get(item_key)
    return holder if isinstance(holder, str) else None


def is_withdrawn(fact: dict) -> bool:
    return fact.get("status") == "withdrawn" or bool(fact.get("invalidated_reason"))


def active_facts(state: Any) -> list[dict]:
    return [f for f in _section(state, "facts") if isinstance(f, dict) and not is_withdrawn(f)]


def withdrawn_facts(state: Any) -> list[dict]:
    return [f for f in _section(state, "facts") if isinstance(f, dict) and is_withdrawn(f)]


def active_relationships(state: Any) -> list[dict]:
    return [
        r for r in _section(state, "relationships")
        if isinstance(r, dict) and r.get("status", "active") == "active"
    ]


def open_threads(state: Any) -> dict:
    return {
        key: thread
        for key, thread in _section(state, "threads").items()
        if isinstance(thread, dict) and thread.get("status", "open") == "open"
    }


def duplicate_names(state: Any) -> dict[str, list[str]]:
    """Display names carried by two or more entities: a signal, never a refusal.

    Two people called Alice is ordinary fiction (a mother and daughter, a false
    name), so nothing refuses it; but a narrator that loses track of which
    Alice is which needs someone to notice. Names compare lower-cased and
    stripped, because "Alice" and "alice " are one name to a reader; unnamed
    entities compete for nothing and are skipped.
    """
    entities = state.get("entities") if isinstance(state, dict) else None
    if not isinstance(entities, dict):
        return {}
    seen: dict[str, list[str]] = {}
    for key, value in entities.items():
        name = value.get("name") if isinstance(value, dict) else None
        name = name.strip().lower() if isinstance(name, str) else ""
        if name:
            seen.setdefault(name, []).append(key)
    return {name: keys for name, keys in seen.items() if len(keys) > 1}
