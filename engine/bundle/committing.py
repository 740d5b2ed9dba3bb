"""The last step of every import: write a checked `Plan`, rebuild what is
derived, and say what happened.

    report = import_new(db, plan, embedder=embedder)             # a new campaign
    report = import_into(db, plan, campaign_id, embedder=None)   # cards / knowledge added to one

`facade` (bundles, AI Dungeon, SillyTavern) and `interop` (any file) both end
here. Like every lower layer it takes plain values: the `Database`, a campaign
id, and the embedder to use for vectors (None: vectors are left to the next
turn's derived work). It never sees a `Workbench` or a `Campaign`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFound
from ..store import CampaignRow, Database
from ..story import StoryTree
from .plan import Plan
from .reports import ImportReport
from .write import write_attachments, write_plan

if TYPE_CHECKING:
    from ..providers.embedders import Embedder

__all__ = ["import_into", "import_new", "rebuild_vectors"]


def import_new(db: Database, plan: Plan, *, embedder: Embedder | None = None) -> ImportReport:
    """The plan as a new campaign, in one transaction; then its vectors (with
    `embedder`), outside it. The report describes the new campaign."""
    with db.writing() as session:
        written = write_plan(session, plan)
    return _report(db, plan, written.campaign_id, written.warnings, embedder)


def import_into(db: Database, plan: Plan, campaign_id: int, *, embedder: Embedder | None = None) -> ImportReport:
    """The plan's cards and knowledge added to campaign `campaign_id`, in one
    transaction; then vectors (with `embedder`), outside it."""
    with db.writing() as session:
        written = write_attachments(session, plan, campaign_id)
    return _report(db, plan, campaign_id, written.warnings, embedder)


def _report(db: Database, plan: Plan, campaign_id: int, warnings: list[str], embedder: Embedder | None) -> ImportReport:
    warnings = plan.notes.warnings + warnings + rebuild_vectors(db, campaign_id, plan, embedder)
    title, head, can_undo, can_redo = _facts(db, campaign_id)
    counts = {k: v for k, v in plan.counts().items() if v}
    return ImportReport(campaign_id, title, plan.format, counts, plan.notes.repaired, plan.notes.dropped,
                        list(plan.notes.not_carried), warnings, head, can_undo, can_redo)


def _facts(db: Database, campaign_id: int) -> tuple[str, tuple[int | None, int], bool, bool]:
    """Title, head, can undo, can redo: what `Campaign` says of the campaign,
    read the same way (the row and `StoryTree`), in one session."""
    with db.reading() as session:
        row = session.get(CampaignRow, campaign_id)
        if row is None:
            raise NotFound(f"Campaign {campaign_id} no longer exists in {db.path}.")
        tree = StoryTree(session, row)
        return (row.title, (row.head_branch_id, row.head_depth), tree.undo_target() is not None,
                tree.redo_target() is not None)


def rebuild_vectors(db: Database, campaign_id: int, plan: Plan, embedder: Embedder | None) -> list[str]:
    """Vectors are never carried; with an embedder they are made now. A
    failure costs nothing but a warning (returned): the import has committed,
    and the next turn's derived work tries again."""
    if not (plan.memories or plan.knowledge) or embedder is None:
        return []
    try:
        if plan.memories:
            from ..memory.bank import embed_pending

            while embed_pending(db, campaign_id, embedder):
                pass
        if plan.knowledge:
            from ..knowledge.embedding import catch_up

            outcome = catch_up(db, campaign_id, embedder, progress=False)
            if outcome.error:
                return [outcome.words]
    except Exception as exc:  # noqa: BLE001 - reported; the import itself stands
        return [f"Vectors could not be rebuilt now ({type(exc).__name__}: {exc}); the next turn's derived work "
                "will try again. Lexical knowledge search works meanwhile."]
    return []
