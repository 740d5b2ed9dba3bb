"""Character cards (v1, chara_card_v2, chara_card_v3) as campaigns.

A card arrives as JSON, as a PNG image with the card base64-encoded in a
`chara` (v2) or `ccv3` (v3) tEXt/iTXt chunk (read with Pillow; `ccv3` wins
when both are present, as the v3 spec asks), or as a `.charx` archive (a zip
holding `card.json`). Its embedded `character_book` becomes story cards or
one knowledge source, exactly as SillyTavern World Info does.

The character itself becomes what the reader chooses (`character_as`):

- "cast" (default): a story card for the character (keyed by name and
  nickname) and an entity in the narrative state; the player is someone else.
- "protagonist": the player plays the character; its name becomes the
  protagonist and its description and personality the premise.
- "premise": the description, personality and scenario become the premise.

In every choice the greeting (`first_mes`) is the opening, the scenario joins
the premise, `system_prompt` becomes the AI instructions and
`post_history_instructions` the author's note. `{{char}}` becomes the
character's name and `{{user}}` the protagonist's (when given); anything not
carried is listed with a count.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import zipfile
from typing import Any

from ..budget import standing
from ..bundle import limits
from ..bundle.errors import BundleRefused
from ..bundle.native import read_v1
from ..bundle.plan import Notes, Plan
from .detect import CHARACTER_CARD, detect, detect_bytes
from .ledger import Macros, account
from .worldinfo import book_parts, entries_of

__all__ = ["CHARACTER_AS", "FORMAT_NAME", "card_from_bytes", "charx_members", "read_character_card"]

FORMAT_NAME = "character card"
CHARACTER_AS = ("cast", "protagonist", "premise")
_CHUNKS = ("ccv3", "chara")  # v3 first: a card that has both is read as v3
_CARRIED = {"name", "description", "personality", "scenario", "first_mes", "system_prompt",
            "post_history_instructions", "character_book", "nickname", "assets"}  # assets: named one by one
# Assets named one by one in the report; the rest are counted.
_ASSETS_NAMED = 10
_MEANINGS = {
    "mes_example": "example dialogue (this narrator is not a chat partner)",
    "alternate_greetings": "alternative openings (import again and edit the opening to use one)",
    "group_only_greetings": "greetings for group chats", "creator_notes": "the creator's notes to readers",
    "creator_notes_multilingual": "the creator's notes in other languages", "tags": "tags",
    "creator": "the creator's name", "character_version": "the card's version",
    "extensions": "tool-specific extension data (talkativeness, depth prompt, regex scripts...)",
    "assets": "images and other assets", "source": "where the card was published",
    "creation_date": "the creation date", "modification_date": "the modification date",
}
# Root fields SillyTavern and TavernAI write beside `data` (mirrors of it, or
# the app's own bookkeeping).
_ROOT_CARRIED = {"spec", "spec_version", "data", "name", "description", "personality", "scenario", "first_mes",
                 "mes_example", "character_book"}
_ROOT_MEANINGS = {"avatar": "the avatar file name", "chat": "the name of the last chat",
                  "create_date": "the creation date", "talkativeness": "group-chat talkativeness",
                  "fav": "the favourite flag", "creatorcomment": "the creator's notes", "tags": "tags",
                  "creator_notes": "the creator's notes"}


# ------------------------------------------------------------------ carriers
def card_from_bytes(raw: bytes) -> dict:
    """The card JSON inside a PNG or a .charx archive."""
    found = detect_bytes(raw)
    if found is None:
        raise BundleRefused("This is not a PNG image or a .charx archive. Nothing was imported.")
    return _from_png(raw) if found.version == "png" else _from_charx(raw)


def _from_png(raw: bytes) -> dict:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            chunks = dict(getattr(image, "text", {}) or {})
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise BundleRefused(f"The PNG image could not be read ({exc}). Nothing was imported.") from None
    for name in _CHUNKS:
        if name in chunks:
            return _decode_chunk(chunks[name], name)
    if "naidata" in chunks:
        raise BundleRefused("This PNG holds a NovelAI lorebook (a `naidata` chunk), not a character card; export "
                            "the lorebook as a .lorebook file from NovelAI and import that. Nothing was imported.")
    listed = ", ".join(sorted(chunks)) or "none"
    raise BundleRefused(f"This PNG image carries no character card: it has no `chara` or `ccv3` text chunk "
                        f"(text chunks found: {listed}). Nothing was imported.")


def _decode_chunk(value: str, name: str) -> dict:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        decoded = value  # a few writers put the JSON in the chunk as it is
    try:
        card = json.loads(decoded)
    except json.JSONDecodeError as exc:
        raise BundleRefused(f"The PNG's `{name}` chunk is not a character card ({exc.msg}). Nothing was "
                            "imported.") from None
    if not isinstance(card, dict):
        raise BundleRefused(f"The PNG's `{name}` chunk holds a {type(card).__name__}, not a character card. "
                            "Nothing was imported.")
    return card


def _from_charx(raw: bytes) -> dict:
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            info = archive.getinfo("card.json")
            if info.file_size > limits.MAX_BUNDLE_BYTES:
                raise BundleRefused("The archive's card.json is larger than an import may read. Nothing was "
                                    "imported.")
            text = archive.read(info).decode("utf-8-sig")
    except KeyError:
        raise BundleRefused("This zip archive has no card.json, so it is not a .charx character card. Nothing was "
                            "imported.") from None
    except (zipfile.BadZipFile, UnicodeDecodeError, OSError) as exc:
        raise BundleRefused(f"The .charx archive could not be read ({exc}). Nothing was imported.") from None
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleRefused(f"The archive's card.json is not valid JSON ({exc.msg}). Nothing was imported.") from None
    if not isinstance(card, dict):
        raise BundleRefused("The archive's card.json is not a character card object. Nothing was imported.")
    return card


def charx_members(raw: bytes) -> list[str] | None:
    """The files of a .charx archive besides card.json (its assets), or None
    when `raw` is not one."""
    found = detect_bytes(raw)
    if found is None or found.version != "charx":
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            return [n for n in archive.namelist() if n != "card.json" and not n.endswith("/")]
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


# ------------------------------------------------------------------ the card
def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _fields(card: dict) -> tuple[dict, str]:
    """(the card's fields, its spec) for v1 (fields at the root) and v2/v3 (in `data`)."""
    spec = card.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        if not isinstance(card.get("data"), dict):
            raise BundleRefused(f"This {spec} card has no `data` object. Nothing was imported.")
        return card["data"], spec
    return card, "v1"


def read_character_card(card: Any, *, character_as: str = "cast", protagonist: str | None = None,
                        as_knowledge: bool = False, classification: str = "reference",
                        fallback_title: str = "", archive: list[str] | None = None) -> Plan:
    """A card as a new campaign; pure. `archive`: the other files of the
    .charx it came in, named in the report (no asset is carried)."""
    if character_as not in CHARACTER_AS:
        raise BundleRefused(f"character_as must be one of {', '.join(CHARACTER_AS)}, not {character_as!r}. "
                            "Nothing was imported.")
    found = detect(card)
    if found.format != CHARACTER_CARD:
        raise BundleRefused(f"This is not a character card: it looks like {found.label}. Nothing was imported.")
    data, spec = _fields(card)
    name = _text(data.get("name")).strip() or fallback_title or "Character"
    if character_as == "protagonist":
        protagonist = name
    notes, macros = Notes(), Macros(user=protagonist, char=name)
    text = {k: macros(_text(data.get(k))) for k in ("description", "personality", "scenario", "first_mes",
                                                    "system_prompt", "post_history_instructions")}
    # Joined, never trimmed: each field arrives exactly as written.
    portrait = "\n\n".join(t for t in (text["description"], text["personality"]) if t.strip())
    premise_parts = [text["scenario"]]
    if character_as in ("protagonist", "premise"):
        premise_parts.insert(0, portrait)
    campaign = {"title": name, "premise": "\n\n".join(p for p in premise_parts if p.strip()),
                "protagonist": protagonist or "", "ai_instructions": text["system_prompt"],
                "authors_note": text["post_history_instructions"]}
    cast = _cast_card(data, name, portrait) if character_as == "cast" and portrait else None
    state = _cast_state(name, portrait, notes) if cast else {}
    if state:
        campaign["state"] = state
    opening = text["first_mes"]
    nodes = [{"id": 1, "branch": 1, "depth": 0, "kind": "start", "text": opening, "live": True,
              "state_after": state}] if opening.strip() else []
    plan = read_v1({"campaign": campaign, "branches": [{"id": 1, "parent": None}], "nodes": nodes},
                   format_name=f"{FORMAT_NAME} ({spec})")
    knowledge, cards = [], []
    book = data.get("character_book") if isinstance(data.get("character_book"), dict) else None
    if book is None and isinstance(card.get("character_book"), dict):
        book = card["character_book"]
    if book is not None and book.get("entries"):
        _, entries = entries_of(book, notes, macros)
        # The book's name is carried: the knowledge source's title, or each card's origin.
        book_name = _text(book.get("name")).strip()
        origin = f"{FORMAT_NAME}: {name}" + (f", lorebook “{book_name}”" if book_name else "")
        knowledge, cards = book_parts(book_name or f"{name}'s lorebook", entries, as_knowledge,
                                      classification, notes, origin=origin)
    elif book is not None:
        account(notes, [book], {"entries"}, {"name": "the name of its lorebook, which has no entries"},
                "character book (it has no entries)")
    if cast is not None:
        from ..bundle.library import read_cards

        cast_cards = read_cards([cast], notes)
        for c in cast_cards:
            c.origin = f"{FORMAT_NAME}: {name}"[:200]
        cards = cast_cards + cards
    account(notes, [data], _CARRIED, _MEANINGS, "card")
    _name_assets(notes, data, archive)
    _name_risuai(notes, data)
    if spec != "v1":
        account(notes, [card], _ROOT_CARRIED, _ROOT_MEANINGS, "file (outside the card's data)")
    macros.report(notes)
    plan.knowledge, plan.cards = knowledge, cards
    plan.notes.merge(notes)
    return plan


def _name_assets(notes: Notes, data: dict, archive: list[str] | None) -> None:
    """Each asset by name: the card's v3 `assets` list and the .charx's files."""
    assets = [a for a in data.get("assets") or [] if isinstance(a, dict)] if isinstance(data.get("assets"), list) else []
    if assets:
        named = ", ".join(f"{_text(a.get('type')) or 'asset'} “{_text(a.get('name'))}” ({_text(a.get('uri'))[:80]})"
                          for a in assets[:_ASSETS_NAMED])
        more = f", and {len(assets) - _ASSETS_NAMED} more" if len(assets) > _ASSETS_NAMED else ""
        notes.lose(f"the card's {len(assets)} asset{'s' if len(assets) != 1 else ''} (images, sounds; the "
                   f"character's picture is not carried): {named}{more}")
    if archive:
        named = ", ".join(archive[:_ASSETS_NAMED])
        more = f", and {len(archive) - _ASSETS_NAMED} more" if len(archive) > _ASSETS_NAMED else ""
        notes.lose(f"{len(archive)} file{'s' if len(archive) != 1 else ''} in the .charx archive besides card.json "
                   f"(not carried): {named}{more}")


def _name_risuai(notes: Notes, data: dict) -> None:
    """A RisuAI export keeps its own data in `extensions.risuai` (scripts,
    emotion images, image-generation settings...): named field by field."""
    extensions = data.get("extensions")
    risu = extensions.get("risuai") if isinstance(extensions, dict) else None
    if isinstance(risu, dict):
        fields = sorted(k for k, v in risu.items() if v not in (None, "", [], {}, False))
        if fields:
            notes.lose("RisuAI's own data in the card (`extensions.risuai`; scripts are never run here): "
                       + ", ".join(f"`{f}`" for f in fields))


def _cast_card(data: dict, name: str, portrait: str) -> dict:
    keys = [name] + [n for n in [_text(data.get("nickname")).strip()] if n and n != name]
    return {"title": name, "keys": keys, "entry": portrait, "card_type": "character",
            "notes": "The character from the imported card."}


def _cast_state(name: str, portrait: str, notes: Notes) -> dict:
    """The character as an entity of the narrative state, which every prompt
    shows whole: its description is the portrait within its bound (the whole
    portrait stays in the cast card, which enters when the character is named)."""
    from ..narrative import model

    portrait, cut_note = standing.cut("cast_description", portrait, f"{name}'s description in the narrative state")
    if cut_note:
        notes.repair(cut_note + " (the cast card keeps it whole)")

    key = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")[:64] or "character"
    if not model.is_key(key):
        key = "character"
    state = model.empty()
    state["entities"][key] = {"type": "character", "name": name, "status": model.DEFAULT_STATUS,
                              "description": portrait}
    return state
