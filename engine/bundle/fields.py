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

from ..narrative.model import SECTIONS
from ..store.models import utcnow
from .plan import Notes

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


def state_document(value: Any, notes: Notes, what: str) -> dict:
    """A narrative state kept exactly when sound; a section of the wrong kind
    becomes empty, and a document that is not an object becomes `{}` (never
    another position's state: an empty document is the honest guess)."""
    if value is MISSING or value is None:
        return {}
    if not isinstance(value, dict):
        notes.repair(f"{what} was not a state document; read as the empty state")
        return {}
    broken = [name for name, kind in SECTIONS.items() if name in value and not isinstance(value[name], kind)]
    if not broken:
        return value
    document = dict(value)  # a new outer object: the given one is left as it was
    for name in broken:
        notes.repair(f"{what} had a malformed '{name}' section; it was emptied")
        document[name] = SECTIONS[name]()
    return document
