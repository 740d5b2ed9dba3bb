"""Reading one value from a file: the right type, or a repair in words.

Each reader takes the raw value (or MISSING when the key is absent) and the
import's `Notes`. A missing value takes its default silently (the format
could not say); a present but wrong value is repaired and the repair is
noted. Refusals are the callers' business: only they know whether a wrong
value here would misplace the story.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..budget import standing
from ..narrative.model import SECTIONS
from ..store.models import utcnow
from .plan import Notes
from .statefit import fit_state
from .statefit import state_key as _state_key

__all__ = ["MISSING", "flag", "is_whole", "json_object", "moment", "optional_moment", "optional_whole",
           "state_document", "string"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def is_whole(value: Any) -> bool:
    """An int that is not a bool (JSON `true` must never pass as depth 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def string(value: Any, notes: Notes, what: str, default: str = "", limit: int | None = None) -> str:
    if value is MISSING or value is None:
        return default
    if not isinstance(value, str):
        notes.repair(f"{what} was not text; left as {default!r}")
        return default
    if limit is not None and len(value) > limit:
        notes.repair(f"{what} was longer than {limit} characters; shortened")
        return value[:limit]
    return value


def flag(value: Any, notes: Notes, what: str, default: bool) -> bool:
    if value is MISSING or value is None:
        return default
    if not isinstance(value, bool):
        notes.repair(f"{what} was not true or false; read as {str(default).lower()}")
        return default
    return value


def optional_whole(value: Any, notes: Notes, what: str) -> int | None:
    if value is MISSING or value is None:
        return None
    if not is_whole(value):
        notes.repair(f"{what} was not a whole number; left empty")
        return None
    return value


def moment(value: Any, notes: Notes, what: str) -> datetime:
    found = optional_moment(value, notes, what)
    return found if found is not None else utcnow()


def optional_moment(value: Any, notes: Notes, what: str) -> datetime | None:
    """ISO 8601 text to a naive UTC datetime, as the database keeps them."""
    if value is MISSING or value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed
    notes.repair(f"{what} was not a date and time; the time of import was used")
    return None


def json_object(value: Any, notes: Notes, what: str) -> dict:
    """The object itself (readers never change what they are given, so no
    copy is needed), or {} with a note."""
    if value is MISSING or value is None:
        return {}
    if not isinstance(value, dict):
        notes.repair(f"{what} was not an object; left empty")
        return {}
    return value


def state_document(value: Any, notes: Notes, what: str, seen: dict[str, int] | None = None) -> dict:
    """A narrative state kept exactly when sound; a section of the wrong kind
    becomes empty, and a document that is not an object becomes `{}` (never
    another position's state: an empty document is the honest guess)."""
    if value is MISSING or value is None:
        return {}
    if not isinstance(value, dict):
        notes.repair(f"{what} was not a state document; read as the empty state")
        return {}
    broken = [name for name, kind in SECTIONS.items() if name in value and not isinstance(value[name], kind)]
    document = value
    if broken:
        document = dict(value)  # a new outer object: the given one is left as it was
        for name in broken:
            notes.repair(f"{what} had a malformed '{name}' section; it was emptied")
            document[name] = SECTIONS[name]()
    document = _named_by_keys(document, notes, what)
    seen = {} if seen is None else seen
    fitted, how = fit_state(document, seen)
    if how:
        # The size is given where there is one state (the campaign's); node
        # snapshots are counted instead, or a long story's report would list each.
        size = f" ({seen[_state_key(document)]:,} tokens)" if what == "the campaign's state" else ""
        notes.repair(f"{what} was past its bound of {standing.BOUNDS['state'].words}{size} as the prompt shows "
                     f"it, so that every turn can still be built at the default {standing.DEFAULT_WINDOW:,}-token "
                     f"window; {how}")
    return fitted


def _key(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _named_by_keys(document: dict, notes: Notes, what: str) -> dict:
    """Where a state names an entity it holds the entity's key (text, or
    nothing), and an entity's name is text. Anything else there (a list, a
    number, an object) once imported cleanly and then failed every turn that
    showed the state or searched by its names, with a raw TypeError or
    AttributeError; it is cleared, and the repair said. Copies only what it
    changes."""
    fixed: dict[str, Any] = {}
    scene = document.get("scene")
    if isinstance(scene, dict):
        present = scene.get("present", [])
        sound_present = isinstance(present, list) and all(isinstance(k, str) for k in present)
        if not _key(scene.get("location")) or not sound_present:
            fixed["scene"] = {**scene, "location": scene.get("location") if _key(scene.get("location")) else None,
                              "present": [k for k in present if isinstance(k, str)] if isinstance(present, list)
                              else []}
    possessions = document.get("possessions")
    if isinstance(possessions, dict) and not all(isinstance(v, str) for v in possessions.values()):
        fixed["possessions"] = {k: v for k, v in possessions.items() if isinstance(v, str)}
    entities = document.get("entities")
    if isinstance(entities, dict) and not all(_key(e.get(f)) for e in entities.values() if isinstance(e, dict)
                                              for f in ("location", "name")):
        fixed["entities"] = {k: {**e, **{f: None for f in ("location", "name") if not _key(e.get(f))}}
                             if isinstance(e, dict) else e for k, e in entities.items()}
    for section, ends in (("facts", ("subject", "object")), ("relationships", ("source", "target"))):
        rows = document.get(section)
        if isinstance(rows, list) and not all(_key(r.get(end)) for r in rows if isinstance(r, dict) for end in ends):
            fixed[section] = [{**r, **{end: None for end in ends if not _key(r.get(end))}}
                              if isinstance(r, dict) else r for r in rows]
    if not fixed:
        return document
    for name in fixed:
        notes.repair(f"{what} had a reference or a name in its '{name}' section that is not text; it was cleared")
    return {**document, **fixed}
