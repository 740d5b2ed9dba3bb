"""Adding, editing and deleting story cards from Python.

Each call takes a session the caller opened for writing, so a notebook
helper or an importer can add several cards in one transaction. Values are
checked before anything is written: a card that could never fire (no keys,
not constant) is allowed, because it is still reference for the reader and
can be given keys later, but a card with no title and no text is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..errors import NotFound
from ..store.cards_tables import StoryCardRow
from .errors import CardRefused

__all__ = ["EDITABLE", "LOGICS", "Card", "add_card", "cards", "delete_card", "edit_card", "normal_keys"]

EDITABLE = ("title", "keys", "entry", "card_type", "notes", "constant", "enabled", "secondary_keys", "logic")
# SillyTavern's selective logic (`selectiveLogic`), in the order of its numbers 0..3.
LOGICS = ("and_any", "not_all", "not_any", "and_all")
_LIMITS = {"title": 200, "card_type": 40}


@dataclass(frozen=True)
class Card:
    id: int
    title: str
    keys: tuple[str, ...]
    entry: str
    card_type: str
    notes: str
    constant: bool
    enabled: bool
    origin: str
    created_at: datetime
    # Narrowing keys and how they combine (see engine.cards.triggers).
    secondary_keys: tuple[str, ...] = ()
    logic: str = "and_any"

    @classmethod
    def of(cls, row: StoryCardRow) -> Card:
        return cls(id=row.id, title=row.title, keys=tuple(row.keys or ()), entry=row.entry, card_type=row.card_type,
                   notes=row.notes, constant=bool(row.constant), enabled=bool(row.enabled), origin=row.origin or "",
                   created_at=row.created_at, secondary_keys=tuple(row.secondary_keys or ()),
                   logic=row.logic or "and_any")


def normal_keys(value: Any) -> list[str]:
    """Keys as a list of non-empty strings; "a, b" is two keys, as AI Dungeon writes them."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) for k in value):
        raise CardRefused(f"A card's keys must be a list of words or one comma-separated string, not {value!r}. "
                          "Nothing was written.")
    return [k.strip() for k in value if k.strip()]


def _checked(field: str, value: Any) -> Any:
    if field in ("keys", "secondary_keys"):
        return normal_keys(value)
    if field == "logic":
        if value not in LOGICS:
            raise CardRefused(f"A card's logic must be one of {', '.join(LOGICS)}, not {value!r}. "
                              "Nothing was written.")
        return value
    if field in ("constant", "enabled"):
        if not isinstance(value, bool):
            raise CardRefused(f"A card's {field} must be True or False, not {value!r}. Nothing was written.")
        return value
    if not isinstance(value, str):
        raise CardRefused(f"A card's {field} must be text, not {type(value).__name__}. Nothing was written.")
    limit = _LIMITS.get(field)
    if limit and len(value) > limit:
        raise CardRefused(f"A card's {field} may be at most {limit} characters; this one has {len(value)}. "
                          "Shorten it. Nothing was written.")
    return value


def add_card(session: Session, campaign_id: int, *, title: str = "", keys: Any = (), entry: str = "",
             card_type: str = "", notes: str = "", constant: bool = False, enabled: bool = True,
             origin: str = "added by hand", secondary_keys: Any = (), logic: str = "and_any") -> int:
    """The new card's id."""
    def listed(value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value

    values = {f: _checked(f, v) for f, v in (("title", title), ("keys", listed(keys)),
                                             ("entry", entry), ("card_type", card_type), ("notes", notes),
                                             ("constant", constant), ("enabled", enabled), ("origin", origin),
                                             ("secondary_keys", listed(secondary_keys)), ("logic", logic))}
    if not (values["title"].strip() or values["entry"].strip()):
        raise CardRefused("A card needs a title or a text. Nothing was written.")
    row = StoryCardRow(campaign_id=campaign_id, **values)
    session.add(row)
    session.flush()
    return row.id


def _row(session: Session, campaign_id: int, card_id: int) -> StoryCardRow:
    row = session.get(StoryCardRow, card_id)
    if row is None or row.campaign_id != campaign_id:
        raise NotFound(f"Campaign {campaign_id} has no story card {card_id}; camp.story_cards() lists its cards.")
    return row


def edit_card(session: Session, campaign_id: int, card_id: int, **changes: Any) -> Card:
    """The card as it is after the change; only the named fields move."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise CardRefused(f"A card has no field {', '.join(unknown)}; the editable fields are "
                          f"{', '.join(EDITABLE)}. Nothing was written.")
    checked = {f: _checked(f, v) for f, v in changes.items()}
    row = _row(session, campaign_id, card_id)
    if not ((checked.get("title", row.title)).strip() or (checked.get("entry", row.entry)).strip()):
        raise CardRefused("A card needs a title or a text; this change would leave it with neither. "
                          "Nothing was written.")
    for field, value in checked.items():
        setattr(row, field, value)
    session.flush()
    return Card.of(row)


def delete_card(session: Session, campaign_id: int, card_id: int) -> None:
    session.delete(_row(session, campaign_id, card_id))
    session.flush()


def cards(session: Session, campaign_id: int) -> list[Card]:
    """The campaign's cards in the order they were added."""
    rows = session.scalars(select(StoryCardRow).where(StoryCardRow.campaign_id == campaign_id)
                           .order_by(StoryCardRow.id)).all()
    return [Card.of(r) for r in rows]
