"""The functions `Workbench` and `Campaign` delegate to.

    camp.export(path)                   -> export_campaign(db, campaign_id, path, machine_text=...)
    wb.import_campaign(path_or_dict)    -> import_campaign(db, ..., embedder=...)
    wb.backup() / wb.backups()          -> backup(db) / backups(db)
    camp.story_cards()                  -> story_cards(db, campaign_id)

Like every lower layer they take plain values (a `Database`, a campaign id,
the strings an export scrubs, the embedder for post-import vectors), never
the facade objects: nothing here imports `Workbench` or `Campaign`.

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
from urllib.parse import urlsplit

import pandas as pd
from sqlalchemy import select

from ..budget import standing
from ..errors import CardRefused
from ..store import Database
from ..store.cards_tables import StoryCardRow
from . import backup as backups_module
from . import limits
from .committing import import_new
from .errors import BundleRefused
from .export import build_bundle
from .loading import load
from .native import FORMAT, VERSION
from .reports import ExportReport, ImportReport
from .validate import validate

if TYPE_CHECKING:
    from ..providers.embedders import Embedder

__all__ = ["add_story_card", "backup", "backups", "delete_story_card", "edit_story_card", "export_campaign",
           "import_campaign", "machine_text", "story_cards"]

# `unusable_keys`: the keys that can never fire here (a script's syntax), for the lore panel to show.
CARD_COLUMNS = ["id", "title", "keys", "entry", "card_type", "notes", "constant", "enabled", "origin", "created_at",
                "secondary_keys", "logic", "unusable_keys"]


# ------------------------------------------------------------------ export
def export_campaign(db: Database, campaign_id: int, path: str | Path, *,
                    machine_text: tuple[str, ...]) -> ExportReport:
    """Write campaign `campaign_id` to one JSON file (a directory gets a dated name).

    `machine_text` is what is scrubbed from records on the way out (see
    `machine_text()`); pass () to scrub nothing. The export always writes
    the file; the report says whether this version can import it back, which
    it finds out by running the importer's checks on what it wrote."""
    with db.reading() as session:
        payload, removed = build_bundle(session, campaign_id, machine_text)
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    target = _target(Path(path), payload["campaign"]["title"])
    _write_atomically(target, body)
    importable, warning = _self_check(payload, len(body))
    counts = {"branches": len(payload["branches"]), "nodes": len(payload["nodes"]),
              **{k: len(payload[k]) for k in ("save_points", "memories", "summaries", "state_events", "knowledge",
                                               "story_cards")}}
    return ExportReport(target, len(body), FORMAT, VERSION, importable, limits.MAX_BUNDLE_BYTES, counts, warning,
                        removed)


def machine_text(db_path: str | Path, endpoint_url: str | None) -> tuple[str, ...]:
    """Strings that would say which machine a turn ran on, longest first: the
    database's path, folder and name, and the endpoint's URL and host."""
    db_path = Path(db_path)
    found = {str(db_path.resolve()), str(db_path.resolve().parent), db_path.name}
    url = (endpoint_url or "").strip()
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
def import_campaign(db: Database, path_or_dict: Any, *, embedder: Embedder | None = None) -> ImportReport:
    """A campaign bundle (this workbench's, or the reference app's) as a new
    campaign; with `embedder`, its memories and knowledge are embedded after."""
    return import_new(db, validate(load(path_or_dict)), embedder=embedder)


# ------------------------------------------------------------------ cards
def story_cards(db: Database, campaign_id: int) -> pd.DataFrame:
    """Campaign `campaign_id`'s story cards, one row each."""
    from ..cards import unusable_keys

    with db.reading() as session:
        rows = session.scalars(select(StoryCardRow).where(StoryCardRow.campaign_id == campaign_id)
                               .order_by(StoryCardRow.id)).all()
        data = [{"id": r.id, "title": r.title, "keys": list(r.keys or []), "entry": r.entry,
                 "card_type": r.card_type, "notes": r.notes, "constant": bool(r.constant), "enabled": bool(r.enabled),
                 "origin": r.origin, "created_at": r.created_at, "secondary_keys": list(r.secondary_keys or []),
                 "logic": r.logic or "and_any",
                 "unusable_keys": unusable_keys([*(r.keys or []), *(r.secondary_keys or [])])} for r in rows]
    return pd.DataFrame(data, columns=CARD_COLUMNS)


def add_story_card(db: Database, campaign_id: int, **fields: Any) -> int:
    """A new card in campaign `campaign_id` (see `engine.cards.add_card`); its id.
    Its text is held to the bound an imported card is cut to (engine.budget.standing)."""
    from ..cards import add_card

    standing.check("card_entry", fields.get("entry", ""), CardRefused, "Nothing was written.")
    with db.writing() as session:
        return add_card(session, campaign_id, **fields)


def edit_story_card(db: Database, campaign_id: int, card_id: int, **changes: Any):
    """Change card `card_id` of campaign `campaign_id` (see `engine.cards.edit_card`)."""
    from ..cards import edit_card

    standing.check("card_entry", changes.get("entry", ""), CardRefused, "Nothing was written.")
    with db.writing() as session:
        return edit_card(session, campaign_id, card_id, **changes)


def delete_story_card(db: Database, campaign_id: int, card_id: int) -> None:
    """Remove card `card_id` of campaign `campaign_id` (see `engine.cards.delete_card`)."""
    from ..cards import delete_card

    with db.writing() as session:
        delete_card(session, campaign_id, card_id)


# ------------------------------------------------------------------ backups
def backup(db: Database) -> backups_module.Backup:
    """A verified copy of the whole database in `backups/` beside it."""
    return backups_module.create(db.path)


def backups(db: Database) -> list[backups_module.Backup]:
    """The backups beside this database, newest first."""
    return backups_module.existing(db.path)
