"""Moving campaigns: bundles out and in, and files from other tools.

    camp.export("westhaven.campaign.json")                      # one campaign, one JSON file
    wb.import_campaign("westhaven.campaign.json")               # checked whole, then one transaction
    wb.import_ai_dungeon("scenario.json", answers={"Your name": "Aldric"})
    wb.import_sillytavern("lorebook.json", as_knowledge=True)

Those delegate to `facade`, whose functions take plain values (a `Database`,
a campaign id), as every layer below the notebook objects does:

    facade.import_campaign(db, "westhaven.campaign.json", embedder=None)
    facade.export_campaign(db, campaign_id, "out.json", machine_text=())

The pieces, each usable alone:

- `build_bundle(session, campaign_id)`: a campaign as this workbench's format
  (`FORMAT`, version `VERSION`);
- `load(path_or_data)`: a file read as JSON, size-capped before reading;
- `validate(payload)`: pure; every check, every repair, no writes. Returns a
  `Plan`, or raises `BundleRefused` naming the problem;
- `write_plan(session, plan)` / `write_attachments(...)`: the thin writers;
- `read_reference`, `read_ai_dungeon`, `read_ai_dungeon_cards`,
  `read_sillytavern`: the readers of other tools' files, each ending in a
  `Plan` checked by the same rules.
"""
from .aidungeon import read_ai_dungeon, read_ai_dungeon_cards
from .errors import BundleRefused
from .export import build_bundle
from .loading import load
from .native import FORMAT, VERSION
from .plan import Plan
from .reference import read as read_reference
from .reports import ExportReport, ImportReport
from .sillytavern import read_sillytavern
from .validate import READABLE, validate
from .write import write_attachments, write_plan

__all__ = [
    "FORMAT",
    "READABLE",
    "VERSION",
    "BundleRefused",
    "ExportReport",
    "ImportReport",
    "Plan",
    "build_bundle",
    "load",
    "read_ai_dungeon",
    "read_ai_dungeon_cards",
    "read_reference",
    "read_sillytavern",
    "validate",
    "write_attachments",
    "write_plan",
]
