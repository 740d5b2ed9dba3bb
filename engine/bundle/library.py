"""Checking a file's knowledge sources and story cards.

Knowledge is held to the same checks as a file imported by hand (size, text,
class), because Canon that silently failed to arrive would stop the narrator
being told the rules: a bad source refuses the whole file. Its derived parts
(passages, index, vectors) are never read from a file; they are rebuilt from
the text. Story cards only matter to themselves, so a bad one is dropped.
"""
from __future__ import annotations

from typing import Any

from ..budget import standing
from ..knowledge import intake
from ..knowledge.chunking import digest
from ..knowledge.refusals import KnowledgeRefused
from ..search.classes import CANON, NORMAL, VISIBILITIES
from .errors import BundleRefused
from .fields import MISSING, flag, moment, string
from .plan import CardPlan, KnowledgePlan, Notes

__all__ = ["HASH_MISMATCH", "read_cards", "read_knowledge", "card_keys"]

HASH_MISMATCH = "The content hash in the imported file did not match its text; it was recomputed on import."


def read_knowledge(raw: Any, notes: Notes) -> list[KnowledgePlan]:
    if raw is MISSING or raw is None:
        return []
    if not isinstance(raw, list):
        raise BundleRefused(f"The file's knowledge section must be a list, and it is a {type(raw).__name__}. "
                            "Nothing was imported.")
    if len(raw) > intake.MAX_SOURCES_PER_CAMPAIGN:
        raise BundleRefused(f"The file has {len(raw)} knowledge sources, past the limit of "
                            f"{intake.MAX_SOURCES_PER_CAMPAIGN} per campaign. Nothing was imported.")
    return [_source(row, i, notes) for i, row in enumerate(raw)]


def _source(row: Any, position: int, notes: Notes) -> KnowledgePlan:
    if not isinstance(row, dict):
        raise BundleRefused(f"Knowledge source {position + 1} is not an object. Nothing was imported.")
    given = row.get("original_filename")
    filename = intake.safe_filename(given if isinstance(given, str) else "")
    if isinstance(given, str) and given and filename != given:
        notes.repair("a knowledge file name carried path parts or hidden characters; only the name was kept")
    content = _content(row.get("content"), filename)
    classification = _class(row.get("classification", MISSING), filename)
    visibility = row.get("visibility", NORMAL)
    if visibility not in VISIBILITIES:
        notes.repair("a knowledge source's visibility was unknown; it was set to normal (shown)")
        visibility = NORMAL
    always = flag(row.get("always_include", MISSING), notes, "a knowledge source's always-include flag", False)
    if always and classification != CANON:
        notes.repair("a non-Canon knowledge source was marked always-include; only Canon may be, so it was cleared")
        always = False
    own_notes = string(row.get("notes", MISSING), notes, "a knowledge source's notes")
    stated = row.get("content_hash")
    if isinstance(stated, str) and stated and stated != digest(content):
        notes.repair(f"the content hash of “{filename}” did not match its text; it was recomputed")
        own_notes = f"{own_notes}\n{HASH_MISMATCH}".strip()
    title = string(row.get("title", MISSING), notes, "a knowledge source's title", limit=200).strip()
    return KnowledgePlan(
        title=title or filename, original_filename=filename, classification=classification,
        enabled=flag(row.get("enabled", MISSING), notes, "a knowledge source's enabled flag", True),
        visibility=visibility, always_include=always, content=content,
        media_type=_media_type(row.get("media_type"), filename), notes=own_notes,
        imported_at=moment(row.get("imported_at", MISSING), notes, "a knowledge source's import time"),
        updated_at=moment(row.get("updated_at", MISSING), notes, "a knowledge source's update time"),
    )


def _content(value: Any, filename: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BundleRefused(f"Knowledge source “{filename}” has no content. A source that silently failed to "
                            "arrive would leave the narrator without it, so nothing was imported.")
    try:
        return intake.decode(value.encode("utf-8"), filename)
    except (KnowledgeRefused, UnicodeEncodeError) as exc:
        raise BundleRefused(f"Knowledge source “{filename}” cannot be imported: {exc} Nothing was imported.") from None


def _class(value: Any, filename: str) -> str:
    if value is MISSING:
        return "reference"
    try:
        return intake.check_class(value)
    except KnowledgeRefused as exc:
        raise BundleRefused(f"Knowledge source “{filename}” has an unknown classification: {exc} "
                            "Nothing was imported.") from None


def _media_type(value: Any, filename: str) -> str:
    if value in intake.MEDIA_TYPES.values():
        return value
    return intake.MEDIA_TYPES.get(intake.extension_of(filename), "text/plain")


# ------------------------------------------------------------------ story cards
def read_cards(raw: Any, notes: Notes) -> list[CardPlan]:
    if raw is MISSING or raw is None:
        return []
    if not isinstance(raw, list):
        notes.drop("the story-card section was not a list, so no story cards were imported")
        return []
    out = []
    for row in raw:
        card = _card(row, notes) if isinstance(row, dict) else None
        if card is None:
            notes.drop("a story card with no title, keys or text was dropped")
            continue
        out.append(card)
    return out


def _card(row: dict, notes: Notes) -> CardPlan | None:
    title = string(row.get("title", MISSING), notes, "a story card's title", limit=200)
    entry = string(row.get("entry", MISSING), notes, "a story card's text")
    keys = card_keys(row.get("keys", MISSING))
    if not (title.strip() or entry.strip() or keys):
        return None
    entry, cut_note = standing.cut("card_entry", entry, f"the text of story card “{title.strip()[:80] or '(untitled)'}”")
    if cut_note:
        notes.repair(cut_note)
    return CardPlan(title=title, keys=keys, entry=entry,
                    card_type=string(row.get("card_type", MISSING), notes, "a story card's type", limit=40),
                    notes=string(row.get("notes", MISSING), notes, "a story card's notes"),
                    created_at=moment(row.get("created_at", MISSING), notes, "a story card's creation time"),
                    constant=flag(row.get("constant", MISSING), notes, "a story card's constant flag", False),
                    enabled=flag(row.get("enabled", MISSING), notes, "a story card's enabled flag", True),
                    origin=string(row.get("origin", MISSING), notes, "a story card's origin", limit=200),
                    secondary_keys=card_keys(row.get("secondary_keys", MISSING)),
                    logic=_logic(row.get("logic", MISSING), notes))


def _logic(value: Any, notes: Notes) -> str:
    """One of engine.cards.LOGICS; anything else is repaired to the default, and said."""
    from ..cards import LOGICS

    if value is MISSING or value in LOGICS:
        return LOGICS[0] if value is MISSING else value
    notes.repair(f"a story card's logic was not one of {', '.join(LOGICS)}; {LOGICS[0]} was used")
    return LOGICS[0]


def card_keys(value: Any) -> list[str]:
    """Keys as a list of words: AI Dungeon writes "a, b", others a list."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    return [k.strip() for k in value if isinstance(k, str) and k.strip()]
