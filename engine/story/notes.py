"""The author's note: a short standing instruction the context builder places
near the end of the prompt (AUTHORS_NOTE_DEPTH lines from the end of the
history), where a small model still heeds it. Kept on the campaign row."""
from __future__ import annotations

from sqlalchemy.orm import Session

from ..errors import NotAllowed, NotFound
from ..store import CampaignRow

__all__ = ["NOTE_LIMIT", "authors_note", "set_authors_note"]

# A standing instruction is a sentence or two ("Keep the tone grim; Mara lies
# about the key."); a page of it belongs in a story card or the AI
# instructions, where it is priced and placed as lore.
NOTE_LIMIT = 1000


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
    if len(text) > NOTE_LIMIT:
        raise NotAllowed(f"The author's note is {len(text):,} characters; keep it under {NOTE_LIMIT:,} (a sentence "
                         "or two). Longer lore belongs in a story card. Nothing was changed.")
    _row(session, campaign_id).authors_note = text
    return text
