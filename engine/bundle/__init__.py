"""Moving campaigns: this workbench's bundles out and in, and verified backups.

Other tools' files are read by `engine.interop`, which ends in the same
checked `Plan` and the same writer.

    camp.export("westhaven.campaign.json")                      # one campaign, one JSON file
    wb.import_campaign("westhaven.campaign.json")               # checked whole, then one transaction
    wb.backup(); wb.backups()                                   # verified copies of the whole file

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
- `read_reference`: the reference web app's bundles (the family this format
  descends from, dispatched by `validate` on its declared version).
"""
from .errors import BundleRefused
from .export import build_bundle
from .loading import load
from .native import FORMAT, VERSION
from .plan import Plan
from .reference import read as read_reference
from .reports import ExportReport, ImportReport
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
    "read_reference",
    "validate",
    "write_attachments",
    "write_plan",
]
