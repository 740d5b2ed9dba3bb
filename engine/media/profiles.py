"""Visual profiles: how an entity should look, kept per campaign.

A profile is three things: `descriptors` (trait -> words, e.g. hair -> "short
black"), `features` (short phrases: "tortoiseshell glasses") and
`style_notes` (free text: "photographic, natural light"). Any entity type
may have one (a person, a room, a badge, a ship): one table, no kind column.

Setting a profile replaces the whole of it, never merges: what you send is
what is stored, so a trait you left out is gone rather than lingering from an
older edit. The entity must exist in the state at the head when the profile
is set; afterwards the profile simply waits, untouched by Undo, Redo, a
restore or a new branch, and shows in a scene packet whenever its entity is
in the scene. None means "no profile"; setting `{}` stores the empty profile.

Nothing here writes the story: the state, the head and the event trail are
read, never changed.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..errors import NotFound, ProfileError
from ..narrative import model
from ..store import CampaignRow, Database
from ..store.media_tables import VisualProfileRow
from ..store.models import utcnow

__all__ = [
    "MAX_DESCRIPTORS",
    "MAX_FEATURES",
    "MAX_KEY",
    "MAX_STYLE_NOTES",
    "MAX_VALUE",
    "all_profiles",
    "as_dict",
    "by_key",
    "checked",
    "checked_key",
    "delete_profile",
    "empty_profile",
    "profile",
    "set_profile",
]

# The reference system's bounds, kept so a profile written there fits here
# and back: enough for a character sheet's worth of looks, short of a place
# to paste a document into an image prompt.
MAX_DESCRIPTORS = 40
MAX_FEATURES = 40
MAX_VALUE = 400
MAX_STYLE_NOTES = 2_000
MAX_KEY = 200


def empty_profile() -> dict:
    return {"descriptors": {}, "features": [], "style_notes": ""}


def checked_key(key: Any) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ProfileError(f"A visual profile needs the entity's key (a word such as 'alice'), not {key!r}.")
    key = key.strip()
    if len(key) > MAX_KEY:
        raise ProfileError(f"The entity key is {len(key)} characters long; a key is at most {MAX_KEY}.")
    return key


def checked(descriptors: Any = None, features: Any = None, style_notes: Any = None) -> dict:
    """The profile as it will be stored, or ProfileError saying what is wrong."""
    return {"descriptors": _descriptors(descriptors), "features": _features(features),
            "style_notes": _style_notes(style_notes)}


def _descriptors(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProfileError("Descriptors are a mapping of trait to words, e.g. {'hair': 'short black'}, "
                           f"not a {type(value).__name__}.")
    if len(value) > MAX_DESCRIPTORS:
        raise ProfileError(f"A profile holds at most {MAX_DESCRIPTORS} descriptors; this one has {len(value)}. "
                           "Fold the minor ones into the features or the style notes.")
    out: dict[str, str] = {}
    for trait, words in value.items():
        if not isinstance(trait, str) or not trait.strip():
            raise ProfileError(f"Every descriptor needs a trait name such as 'hair'; one was {trait!r}.")
        name = trait.strip()[:MAX_KEY]
        if not isinstance(words, str):
            raise ProfileError(f"The descriptor {name!r} must be words (a string), not a {type(words).__name__}.")
        if len(words) > MAX_VALUE:
            raise ProfileError(f"The descriptor {name!r} is {len(words):,} characters long; each value is at "
                               f"most {MAX_VALUE}.")
        if name in out:
            raise ProfileError(f"Two descriptors are both called {name!r}; keep one.")
        out[name] = words.strip()
    return out


def _features(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ProfileError("Features are a list of short phrases, e.g. ['tortoiseshell glasses'], "
                           f"not a {type(value).__name__}.")
    if len(value) > MAX_FEATURES:
        raise ProfileError(f"A profile holds at most {MAX_FEATURES} features; this one has {len(value)}.")
    out = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ProfileError(f"Every feature is a phrase of words; one was {item!r}.")
        if len(item) > MAX_VALUE:
            raise ProfileError(f"A feature is {len(item):,} characters long; each is at most {MAX_VALUE}.")
        out.append(item.strip())
    return out


def _style_notes(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProfileError(f"Style notes are words (a string), not a {type(value).__name__}.")
    if len(value) > MAX_STYLE_NOTES:
        raise ProfileError(f"The style notes are {len(value):,} characters long; they are at most "
                           f"{MAX_STYLE_NOTES:,}.")
    return value.strip()


def as_dict(row: VisualProfileRow) -> dict:
    """A fresh copy each time: a caller editing it never edits a cached row."""
    return {"descriptors": dict(row.descriptors or {}), "features": list(row.features or []),
            "style_notes": row.style_notes or ""}


def by_key(session: Session, campaign_id: int) -> dict[str, dict]:
    """Every profile of a campaign, ordered by key, in one query."""
    rows = session.scalars(select(VisualProfileRow).where(VisualProfileRow.campaign_id == campaign_id)
                           .order_by(VisualProfileRow.entity_key))
    return {row.entity_key: as_dict(row) for row in rows}


def _campaign(session: Session, campaign_id: int) -> CampaignRow:
    row = session.get(CampaignRow, campaign_id)
    if row is None:
        raise NotFound(f"There is no campaign {campaign_id}.")
    return row


def _row(session: Session, campaign_id: int, key: str) -> VisualProfileRow | None:
    return session.scalar(select(VisualProfileRow).where(VisualProfileRow.campaign_id == campaign_id,
                                                         VisualProfileRow.entity_key == key))


def all_profiles(db: Database, campaign_id: int) -> dict[str, dict]:
    """Every profile of the campaign, by entity key."""
    with db.reading() as session:
        _campaign(session, campaign_id)
        return by_key(session, campaign_id)


def profile(db: Database, campaign_id: int, key: str) -> dict | None:
    """The entity's profile, or None when it has none."""
    key = checked_key(key)
    with db.reading() as session:
        _campaign(session, campaign_id)
        row = _row(session, campaign_id, key)
        return as_dict(row) if row is not None else None


def set_profile(db: Database, campaign_id: int, key: str, descriptors: Any = None, features: Any = None,
                style_notes: Any = None) -> dict:
    """Replace the entity's profile with exactly this one; returns what was stored."""
    key = checked_key(key)
    values = checked(descriptors, features, style_notes)
    with db.writing() as session:
        state = _campaign(session, campaign_id).state
        if model.entity(state, key) is None:
            raise ProfileError(_unknown(state, key))
        row = _row(session, campaign_id, key)
        if row is None:
            session.add(VisualProfileRow(campaign_id=campaign_id, entity_key=key, **values))
        else:
            for name, value in values.items():
                setattr(row, name, value)
            row.updated_at = utcnow()
    return values


def _unknown(state: Any, key: str) -> str:
    known = sorted(k for k in (state.get("entities") if isinstance(state, dict) else None) or {})
    close = difflib.get_close_matches(key, known, n=1)
    hint = (f" Did you mean {close[0]!r}?" if close
            else " The story has no entities yet." if not known
            else f" Known keys: {', '.join(known[:12])}{'…' if len(known) > 12 else ''}.")
    return (f"There is no entity called {key!r} in the story at its head, so it cannot have a visual profile."
            f"{hint} Profiles are keyed by the entity's key in the state, not its display name.")


def delete_profile(db: Database, campaign_id: int, key: str) -> None:
    """Remove the profile; the entity itself stays in the story."""
    key = checked_key(key)
    with db.writing() as session:
        _campaign(session, campaign_id)
        gone = session.execute(delete(VisualProfileRow).where(VisualProfileRow.campaign_id == campaign_id,
                                                              VisualProfileRow.entity_key == key)).rowcount
        if not gone:
            raise NotFound(f"There is no visual profile for {key!r} to delete.")
