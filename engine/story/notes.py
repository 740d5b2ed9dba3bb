"""The author's note: a short standing instruction the context builder places
near the end of the prompt (AUTHORS_NOTE_DEPTH lines from the end of the
history), where a small model still heeds it. Kept on the campaign row.

Its bound, with every other protected field's, is in one table
(engine.budget.standing, in tokens); `Campaign.set_authors_note` checks it
before calling here, since this layer sits below the token counter."""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..errors import NotFound
from ..store import CampaignRow

__all__ = ["authors_note", "set_authors_note"]


def _row(session: Session, campaign_id: int) -> CampaignRow:
    row = session.get(CampaignRow, campaign_id)
    if row is None:
        raise NotFound(f"There is no campaign {campaign_id} in this file.")
    return row


def authors_note(session: Session, campaign_id: int) -> str:
    return _row(session, campaign_id).authors_note or ""


def set_authors_note(session: Session, campaign_id: int, text: str) -> str:
    """Replace the note ("" removes it); the stored text comes back."""
    text = (text or "").strip()
    _row(session, campaign_id).authors_note = text
    return text
