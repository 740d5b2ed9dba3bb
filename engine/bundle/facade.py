"""The functions `Workbench` and `Campaign` delegate to.

    camp.export(path)                   -> export_campaign(camp, path)
    wb.import_campaign(path_or_dict)    -> import_campaign(wb, ...)
    wb.import_ai_dungeon(...)           -> import_ai_dungeon(wb, ...)
    wb.import_sillytavern(...)          -> import_sillytavern(wb, ...)
    wb.backup() / wb.backups()          -> backup(wb) / backups(wb)
    camp.story_cards()                  -> story_cards(camp)

Each import is: load the file, check all of it (pure), write it in one
transaction, then rebuild what is derived (vectors) outside it. A refusal
happens before the first write, so a refused file leaves no row anywhere.
"""
from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from sqlalchemy import select

from .. import backup as backups_module
from ..store.cards_tables import StoryCardRow
from . import limits
from .aidungeon import read_ai_dungeon, read_ai_dungeon_cards
from .errors import BundleRefused, refusing
from .export import build_bundle
from .loading import load
from .native import FORMAT, VERSION
from .plan import Plan
from .reports import ExportReport, ImportReport
from .sillytavern import read_sillytavern
from .validate import validate
from .write import write_attachments, write_plan

# Other tools' readers are pure, like validate(); the same net makes a fault in one a refusal in words.
read_ai_dungeon, read_ai_dungeon_cards, read_sillytavern = (
    refusing("The file")(reader) for reader in (read_ai_dungeon, read_ai_dungeon_cards, read_sillytavern))

if TYPE_CHECKING:
    from ..campaign import Campaign
    from ..workbench import Workbench

__all__ = ["add_story_card", "backup", "backups", "delete_story_card", "edit_story_card", "export_campaign",
           "import_ai_dungeon", "import_campaign", "import_file", "import_sillytavern", "story_cards"]

CARD_COLUMNS = ["id", "title", "keys", "entry", "card_type", "notes", "constant", "enabled", "origin", "created_at"]


# ------------------------------------------------------------------ export
def export_campaign(campaign: Campaign, path: str | Path) -> ExportReport:
    """Write one campaign to one JSON file (a directory gets a dated name).

    The export always writes the file; the report says whether this version
    can import it back, which it finds out by running the importer's checks
    on what it wrote."""
    workbench = campaign.workbench
    with workbench.db.reading() as session:
        payload, removed = build_bundle(session, campaign.id, _machine_text(workbench))
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    target = _target(Path(path), payload["campaign"]["title"])
    _write_atomically(target, body)
    importable, warning = _self_check(payload, len(body))
    counts = {"branches": len(payload["branches"]), "nodes": len(payload["nodes"]),
              **{k: len(payload[k]) for k in ("save_points", "memories", "summaries", "state_events", "knowledge",
                                               "story_cards")}}
    return ExportReport(target, len(body), FORMAT, VERSION, importable, limits.MAX_BUNDLE_BYTES, counts, warning,
                        removed)


def _machine_text(workbench: Workbench) -> tuple[str, ...]:
    """Strings that would say which machine a turn ran on, longest first."""
    from urllib.parse import urlsplit

    found = {str(workbench.db.path.resolve()), str(workbench.db.path.resolve().parent), workbench.db.path.name}
    url = (workbench.settings.endpoint_url or "").strip()
    if url:
        found |= {url, url.rstrip("/").removesuffix("/v1"), urlsplit(url).netloc}
    return tuple(sorted((s for s in found if len(s) >= 4 and s != "/"), key=len, reverse=True))


def _target(path: Path, title: str) -> Path:
    if not path.is_dir():
        return path
    slug = "".join(ch if ch.isalnum() else "-" for ch in title.lower()).strip("-")[:60] or "campaign"
    return path / f"{slug}-{datetime.now():%Y%m%d-%H%M%S}.campaign.json"


def _write_atomically(target: Path, body: bytes) -> None:
    """Never a half-written bundle under the final name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(body)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _self_check(payload: dict, size: int) -> tuple[bool, str]:
    if size > limits.MAX_BUNDLE_BYTES:
        return False, (f"This export is larger than this version's {limits.size_label(limits.MAX_BUNDLE_BYTES)} "
                       f"import limit ({size:,} bytes). The file was written, but this version cannot import it.")
    try:
        plan = validate(payload)
    except BundleRefused as exc:
        return False, f"The file was written, but this version would refuse to import it: {exc}"
    changes = plan.notes.repaired + plan.notes.dropped
    if changes:
        return True, "Importing it back would change: " + "; ".join(changes) + "."
    return True, ""


# ------------------------------------------------------------------ imports
def import_campaign(workbench: Workbench, path_or_dict: Any) -> ImportReport:
    """A campaign bundle (this workbench's, or the reference app's) as a new campaign."""
    return _import_new(workbench, validate(load(path_or_dict)))


def import_ai_dungeon(workbench: Workbench, path_or_dict: Any, *, answers: dict[str, str] | None = None,
                      campaign_id: int | None = None, as_knowledge: bool = False,
                      classification: str = "reference") -> ImportReport:
    """An AI Dungeon scenario or adventure as a new campaign; a bare story-card
    list as cards (or, as_knowledge, one knowledge source), added to
    `campaign_id` or to a new campaign named after the file."""
    from .interop import read_any

    data = read_any(path_or_dict)  # a PNG or .charx is read too, so that it is refused by name
    title = _stem(path_or_dict) or "AI Dungeon story cards"
    if isinstance(data, list):
        plan = read_ai_dungeon_cards(data, as_knowledge=as_knowledge, classification=classification, title=title)
        if campaign_id is not None:
            return _import_into(workbench, plan, campaign_id)
        data = {"title": title, "storyCards": data}
    elif campaign_id is not None:
        _scenario_target(workbench, campaign_id)
    return _import_new(workbench, read_ai_dungeon(data, answers, _stem(path_or_dict), as_knowledge=as_knowledge,
                                                  classification=classification))


def import_sillytavern(workbench: Workbench, path_or_dict: Any, *, as_knowledge: bool = False,
                       campaign_id: int | None = None, classification: str = "reference",
                       protagonist: str | None = None) -> ImportReport:
    """SillyTavern World Info as story cards, or (as_knowledge) as one
    knowledge source; into `campaign_id`, or a new campaign named after it.
    `protagonist` is the name {{user}} stands for."""
    from .interop import read_any

    data = read_any(path_or_dict)  # a PNG or .charx is read too, so that it is refused by name
    plan = read_sillytavern(data, as_knowledge=as_knowledge, attach=campaign_id is not None,
                            fallback_title=_stem(path_or_dict), classification=classification,
                            protagonist=protagonist)
    if campaign_id is not None:
        return _import_into(workbench, plan, campaign_id)
    return _import_new(workbench, plan)


def _scenario_target(workbench: Workbench, campaign_id: int) -> None:
    """A scenario always becomes a new campaign, so a campaign_id is a mistake
    said in words: NotFound when there is no such campaign, as for cards."""
    from ..errors import NotAllowed, NotFound
    from ..store import CampaignRow

    with workbench.db.reading() as session:
        exists = session.get(CampaignRow, campaign_id) is not None
    if not exists:
        raise NotFound(f"There is no campaign {campaign_id} to add to; wb.campaigns() lists them.")
    raise NotAllowed("An AI Dungeon scenario imports as a new campaign; pass campaign_id only with a list of "
                     "story cards, or leave it out.")


def _stem(source: Any) -> str:
    return Path(source).stem if isinstance(source, (str, Path)) else ""


def _import_new(workbench: Workbench, plan: Plan) -> ImportReport:
    with workbench.db.writing() as session:
        written = write_plan(session, plan)
    return _report(workbench, plan, written.campaign_id, written.warnings)


def _import_into(workbench: Workbench, plan: Plan, campaign_id: int) -> ImportReport:
    with workbench.db.writing() as session:
        written = write_attachments(session, plan, campaign_id)
    return _report(workbench, plan, campaign_id, written.warnings)


def _report(workbench: Workbench, plan: Plan, campaign_id: int, warnings: list[str]) -> ImportReport:
    from ..campaign import Campaign

    warnings = plan.notes.warnings + warnings + _rebuild_vectors(workbench, campaign_id, plan)
    camp = Campaign(workbench, campaign_id)
    counts = {k: v for k, v in plan.counts().items() if v}
    return ImportReport(campaign_id, camp.title, plan.format, counts, plan.notes.repaired, plan.notes.dropped,
                        list(plan.notes.not_carried), warnings, camp.head, camp.can_undo, camp.can_redo)


def _rebuild_vectors(workbench: Workbench, campaign_id: int, plan: Plan) -> list[str]:
    """Vectors are never carried; with an embedder configured they are made
    now. A failure costs nothing but a warning: the import has committed, and
    the next turn's derived work tries again."""
    if not (plan.memories or plan.knowledge):
        return []
    embedder = workbench.embedder_or_none()
    if embedder is None:
        return []
    try:
        if plan.memories:
            from ..memory.bank import embed_pending

            while embed_pending(workbench.db, campaign_id, embedder):
                pass
        if plan.knowledge:
            from ..knowledge.embedding import catch_up

            outcome = catch_up(workbench.db, campaign_id, embedder, progress=False)
            if outcome.error:
                return [outcome.words]
    except Exception as exc:  # noqa: BLE001 - reported; the import itself stands
        return [f"Vectors could not be rebuilt now ({type(exc).__name__}: {exc}); the next turn's derived work "
                "will try again. Lexical knowledge search works meanwhile."]
    return []


# ------------------------------------------------------------------ cards
def story_cards(campaign: Campaign) -> pd.DataFrame:
    """The campaign's story cards, one row each."""
    with campaign.workbench.db.reading() as session:
        rows = session.scalars(select(StoryCardRow).where(StoryCardRow.campaign_id == campaign.id)
                               .order_by(StoryCardRow.id)).all()
        data = [{"id": r.id, "title": r.title, "keys": list(r.keys or []), "entry": r.entry,
                 "card_type": r.card_type, "notes": r.notes, "constant": bool(r.constant), "enabled": bool(r.enabled),
                 "origin": r.origin, "created_at": r.created_at} for r in rows]
    return pd.DataFrame(data, columns=CARD_COLUMNS)


def import_file(workbench: Workbench, source: Any, **options: Any) -> ImportReport:
    """Any supported file, its format recognised by its own markers (see `interop`)."""
    from .interop import import_file as run

    return run(workbench, source, **options)


def add_story_card(campaign: Campaign, **fields: Any) -> int:
    """A new card in the campaign (see `engine.cards.add_card`); its id."""
    from ..cards import add_card

    with campaign.workbench.db.writing() as session:
        return add_card(session, campaign.id, **fields)


def edit_story_card(campaign: Campaign, card_id: int, **changes: Any):
    from ..cards import edit_card

    with campaign.workbench.db.writing() as session:
        return edit_card(session, campaign.id, card_id, **changes)


def delete_story_card(campaign: Campaign, card_id: int) -> None:
    from ..cards import delete_card

    with campaign.workbench.db.writing() as session:
        delete_card(session, campaign.id, card_id)


# ------------------------------------------------------------------ backups
def backup(workbench: Workbench) -> backups_module.Backup:
    """A verified copy of the whole database in `backups/` beside it."""
    return backups_module.create(workbench.db.path)


def backups(workbench: Workbench) -> list[backups_module.Backup]:
    """The backups beside this database, newest first."""
    return backups_module.existing(workbench.db.path)
