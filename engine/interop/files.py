"""One entry point for other tools' files: recognise the format, then import.

    report = wb.import_file("Seraphina.png", protagonist="Aldric")
    report.format        # "character card (chara_card_v2)": which format it chose
    report.not_carried   # every field it had no place for, with a count

`import_file` reads the file once (PNG and .charx by their magic numbers,
everything else as JSON), asks `detect` which tool wrote it, and hands it to
that tool's reader. A file no reader takes is refused with what it looks
like ("an Agnai memory book, which is not supported"), and writes nothing.
Every argument is checked before anything is read: a path, an answer or a
name no database can hold (a lone surrogate), an id that is not a whole
number, a flag that is not True or False, are refused with a sentence.
Keys that can never fire here (a script's syntax) are reported with each
card's name and a count.

Like `bundle.facade`, these take plain values (a `Database`, a campaign id, an
embedder), and end in `committing`, as the facade's imports do.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bundle.committing import import_into, import_new
from ..bundle.errors import BundleRefused, refusing
from ..bundle.loading import load, read_path
from ..bundle.plan import Plan
from ..bundle.reports import ImportReport
from ..bundle.validate import validate
from ..errors import NotAllowed, NotFound
from ..store import CampaignRow, Database
from .aidungeon import read_ai_dungeon, read_ai_dungeon_cards
from .charcard import CHARACTER_AS, card_from_bytes, charx_members, read_character_card
from .detect import (
    AID_CARDS,
    AID_SCENARIO,
    CHARACTER_CARD,
    KOBOLDAI,
    NOVELAI,
    RISUAI,
    SILLYTAVERN,
    WORKBENCH,
    detect,
    detect_bytes,
)
from .koboldai import read_koboldai
from .ledger import report_unusable
from .novelai import read_novelai
from .risuai import read_risuai
from .sillytavern import read_sillytavern

if TYPE_CHECKING:
    from ..providers.embedders import Embedder

__all__ = ["import_ai_dungeon", "import_character_card", "import_file", "import_sillytavern", "read_any"]

# Other tools' readers are pure, like validate(); the same net makes a fault in one a refusal in words.
read_ai_dungeon, read_ai_dungeon_cards, read_sillytavern = (
    refusing("The file")(reader) for reader in (read_ai_dungeon, read_ai_dungeon_cards, read_sillytavern))

_NOTHING = " Nothing was imported."
# Longest answer or name an argument may carry (a placeholder answer is a name
# or a line; a protagonist's name is stored in a 200-character column).
_MAX_ANSWER = 10_000
_MAX_NAME = 200
_MAX_ID = 2**63 - 1


def read_any(source: Any) -> Any:
    """Parsed JSON, or the card inside a PNG / .charx; size-capped before reading."""
    return _read(source)[0]


def _read(source: Any) -> tuple[Any, bytes | None]:
    """(parsed JSON or the card inside a PNG / .charx, the raw bytes when a
    PNG or .charx was read)."""
    if isinstance(source, (dict, list)):
        return load(source), None  # checks the values (surrogates, 64-bit numbers, depth) as for a file
    if isinstance(source, (str, Path)):
        raw = read_path(source)[1]  # refuses a path no file name can hold, or an unreadable file, in words
    elif isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
    else:
        return load(source), None  # refuses it, naming what was given
    if detect_bytes(raw) is not None:
        return load(card_from_bytes(raw)), raw  # a card's JSON gets the same value checks as a file's
    return load(raw), None


# ------------------------------------------------------------------ arguments
def _text_argument(value: Any, name: str, limit: int) -> None:
    if not isinstance(value, str):
        raise BundleRefused(f"{name} must be text, not {type(value).__name__}.{_NOTHING}")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise BundleRefused(f"{name} holds a lone surrogate (a half of a character that UTF-8 cannot store); "
                            f"pass ordinary text.{_NOTHING}")
    if len(value) > limit:
        raise BundleRefused(f"{name} may be at most {limit:,} characters; this one has {len(value):,}.{_NOTHING}")


def _check_campaign_id(campaign_id: Any) -> None:
    if campaign_id is None:
        return
    if isinstance(campaign_id, bool) or not isinstance(campaign_id, int) or not 0 < campaign_id <= _MAX_ID:
        raise BundleRefused(f"campaign_id must be a campaign's id (a whole number from 1, as wb.campaigns() lists "
                            f"them), not {_shown(campaign_id)}.{_NOTHING}")


def _check_flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise BundleRefused(f"{name} must be True or False, not {_shown(value)}.{_NOTHING}")


def _check_answers(answers: Any) -> dict[str, str] | None:
    """Placeholder answers as text, or a refusal: a value no database can hold
    used to surface as a raw UnicodeEncodeError at the write."""
    if answers is None:
        return None
    if not isinstance(answers, dict):
        raise BundleRefused(f"answers must be a dict of placeholder name to text, not {type(answers).__name__}."
                            f"{_NOTHING}")
    out = {}
    for key, value in answers.items():
        _text_argument(key, "A placeholder name in answers", _MAX_NAME)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        _text_argument(value, f"The answer for ${{{key}}}", _MAX_ANSWER)
        out[key] = value
    return out


def _check_options(*, campaign_id: Any = None, as_knowledge: Any = False, classification: Any = "reference",
                   answers: Any = None, character_as: Any = "cast", protagonist: Any = None) -> dict[str, str] | None:
    """Every import argument but the source, checked before anything is read; the answers, as text."""
    _check_campaign_id(campaign_id)
    _check_flag(as_knowledge, "as_knowledge")
    _text_argument(classification, "classification", _MAX_NAME)
    if not isinstance(character_as, str) or character_as not in CHARACTER_AS:
        raise BundleRefused(f"character_as must be one of {', '.join(CHARACTER_AS)}, not {_shown(character_as)}."
                            f"{_NOTHING}")
    if protagonist is not None:
        _text_argument(protagonist, "protagonist", _MAX_NAME)
    return _check_answers(answers)


def _shown(value: Any) -> str:
    """A value for a message: short, and printable whatever it holds."""
    return ascii(value)[:80]


def _finished(plan: Plan) -> Plan:
    """Every reader's plan gets the same last word on keys that can never fire."""
    report_unusable(plan.notes, plan.cards)
    return plan


def _stem(source: Any) -> str:
    return Path(source).stem if isinstance(source, (str, Path)) else ""


def _attach(plan: Plan) -> Plan:
    """Only what can be added to an existing campaign: cards and knowledge."""
    out = Plan(format=plan.format, campaign=None, knowledge=plan.knowledge, cards=plan.cards, notes=plan.notes)
    if plan.nodes or (plan.campaign or {}).get("premise"):
        out.notes.lose("the file's story, opening and campaign fields: adding to an existing campaign keeps its own "
                       "(import without campaign_id to get them as a new campaign)")
    return out


def import_file(db: Database, source: Any, *, campaign_id: int | None = None, as_knowledge: bool = False,
                classification: str = "reference", answers: dict[str, str] | None = None,
                character_as: str = "cast", protagonist: str | None = None,
                embedder: Embedder | None = None) -> ImportReport:
    """Any supported file, recognised by its own markers. With `campaign_id`
    its cards (or knowledge) are added to that campaign; otherwise it becomes
    a new campaign. The report's `format` says which format was chosen.
    With `embedder`, imported memories and knowledge are embedded after."""
    answers = _check_options(campaign_id=campaign_id, as_knowledge=as_knowledge, classification=classification,
                             answers=answers, character_as=character_as, protagonist=protagonist)
    data, raw = _read(source)
    found = detect(data)
    if not found.supported:
        raise BundleRefused(f"This file was not imported: it looks like {found.label}. Nothing was imported.")
    if found.format == WORKBENCH:
        if campaign_id is not None:
            raise BundleRefused("A campaign bundle always becomes a new campaign; import it without campaign_id. "
                                "Nothing was imported.")
        return import_new(db, validate(data), embedder=embedder)  # read_any has already checked its values
    if campaign_id is not None and protagonist is None:
        protagonist = _protagonist(db, campaign_id)
    plan = _finished(_plan(found.format, data, _stem(source), as_knowledge=as_knowledge,
                           classification=classification, answers=answers, character_as=character_as,
                           protagonist=protagonist, attach=campaign_id is not None,
                           archive=charx_members(raw) if raw is not None else None))
    if campaign_id is not None:
        return import_into(db, plan if plan.campaign is None else _attach(plan), campaign_id, embedder=embedder)
    return import_new(db, plan, embedder=embedder)


@refusing("The file")  # a reader fault on a shape no check foresaw is a refusal, not a traceback
def _plan(fmt: str, data: Any, stem: str, *, as_knowledge: bool, classification: str, answers, character_as: str,
          protagonist: str | None, attach: bool, archive: list[str] | None = None) -> Plan:
    if fmt == CHARACTER_CARD:
        return read_character_card(data, character_as=character_as, protagonist=protagonist,
                                   as_knowledge=as_knowledge, classification=classification, fallback_title=stem,
                                   archive=archive)
    if fmt == RISUAI:
        return read_risuai(data, as_knowledge=as_knowledge, attach=attach, fallback_title=stem,
                           classification=classification, protagonist=protagonist)
    if fmt == SILLYTAVERN:
        return read_sillytavern(data, as_knowledge=as_knowledge, attach=attach, fallback_title=stem,
                                classification=classification, protagonist=protagonist, checked=True)
    if fmt == NOVELAI:
        return read_novelai(data, as_knowledge=as_knowledge, attach=attach, fallback_title=stem,
                            classification=classification)
    if fmt == KOBOLDAI:
        return read_koboldai(data, fallback_title=stem)
    if fmt == AID_CARDS:
        plan = read_ai_dungeon_cards(data, as_knowledge=as_knowledge, classification=classification,
                                     title=stem or "AI Dungeon story cards")
        if attach:
            return plan
        return read_ai_dungeon({"title": stem or "AI Dungeon story cards", "storyCards": data}, answers, stem,
                               as_knowledge=as_knowledge, classification=classification)
    if fmt == AID_SCENARIO:
        return read_ai_dungeon(data, answers, stem, as_knowledge=as_knowledge, classification=classification)
    raise BundleRefused(f"No reader for {fmt}. Nothing was imported.")  # detect and this table disagree


def import_character_card(db: Database, source: Any, **options: Any) -> ImportReport:
    """A character card (JSON, PNG or .charx), refused if the file is anything else."""
    data = read_any(source)
    found = detect(data)
    if found.format != CHARACTER_CARD:
        raise BundleRefused(f"This is not a character card: it looks like {found.label}. Nothing was imported.")
    return import_file(db, source, **options)  # read again: a .charx keeps its archive listing


def _protagonist(db: Database, campaign_id: int) -> str | None:
    with db.reading() as session:
        row = session.get(CampaignRow, campaign_id)
        if row is None:
            raise NotFound(f"There is no campaign {campaign_id}. Nothing was imported.")
        return row.protagonist or None


def import_ai_dungeon(db: Database, path_or_dict: Any, *, answers: dict[str, str] | None = None,
                      campaign_id: int | None = None, as_knowledge: bool = False,
                      classification: str = "reference", embedder: Embedder | None = None) -> ImportReport:
    """An AI Dungeon scenario or adventure as a new campaign; a bare story-card
    list as cards (or, as_knowledge, one knowledge source), added to
    `campaign_id` or to a new campaign named after the file."""
    answers = _check_options(campaign_id=campaign_id, as_knowledge=as_knowledge, classification=classification,
                             answers=answers)
    data = read_any(path_or_dict)  # a PNG or .charx is read too, so that it is refused by name
    title = _stem(path_or_dict) or "AI Dungeon story cards"
    if isinstance(data, list):
        plan = _finished(read_ai_dungeon_cards(data, as_knowledge=as_knowledge, classification=classification,
                                               title=title))
        if campaign_id is not None:
            return import_into(db, plan, campaign_id, embedder=embedder)
        data = {"title": title, "storyCards": data}
    elif campaign_id is not None:
        _scenario_target(db, campaign_id)
    return import_new(db, _finished(read_ai_dungeon(data, answers, _stem(path_or_dict), as_knowledge=as_knowledge,
                                                    classification=classification)), embedder=embedder)


def import_sillytavern(db: Database, path_or_dict: Any, *, as_knowledge: bool = False,
                       campaign_id: int | None = None, classification: str = "reference",
                       protagonist: str | None = None, embedder: Embedder | None = None) -> ImportReport:
    """SillyTavern World Info as story cards, or (as_knowledge) as one
    knowledge source; into `campaign_id`, or a new campaign named after it.
    `protagonist` is the name {{user}} stands for."""
    _check_options(campaign_id=campaign_id, as_knowledge=as_knowledge, classification=classification,
                   protagonist=protagonist)
    data = read_any(path_or_dict)  # a PNG or .charx is read too, so that it is refused by name
    plan = _finished(read_sillytavern(data, as_knowledge=as_knowledge, attach=campaign_id is not None,
                                      fallback_title=_stem(path_or_dict), classification=classification,
                                      protagonist=protagonist))
    if campaign_id is not None:
        return import_into(db, plan, campaign_id, embedder=embedder)
    return import_new(db, plan, embedder=embedder)


def _scenario_target(db: Database, campaign_id: int) -> None:
    """A scenario always becomes a new campaign, so a campaign_id is a mistake
    said in words: NotFound when there is no such campaign, as for cards."""
    with db.reading() as session:
        exists = session.get(CampaignRow, campaign_id) is not None
    if not exists:
        raise NotFound(f"There is no campaign {campaign_id} to add to; wb.campaigns() lists them.")
    raise NotAllowed("An AI Dungeon scenario imports as a new campaign; pass campaign_id only with a list of "
                     "story cards, or leave it out.")

