"""Copying a checked Plan into rows: one transaction, no decisions.

Everything that could refuse has already run (`validate`), so this only
renumbers the file's ids and inserts. It runs inside the caller's
transaction, so a failure at any step (a full disk, a bug, a test's
monkeypatch) rolls back every row it wrote.

Ids are given out before inserting, right after the campaign row has taken
SQLite's write lock, so no other writer can take the same numbers and nodes
can be inserted in bulk.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from ..errors import NotFound
from ..knowledge import intake
from ..knowledge.chunking import CHUNKING_VERSION, PARSER_VERSION, digest
from ..knowledge.importer import build_passages
from ..store import BranchRow, CampaignRow, NodeRow, SavePointRow
from ..store.cards_tables import StoryCardRow
from ..store.knowledge_tables import KnowledgeSourceRow
from ..store.media_tables import VisualProfileRow
from ..store.memory_tables import MemoryRow, SummaryRow
from ..store.narrative_tables import StateEventRow
from ..turns.record import STORED_FIELDS, write_stored
from .errors import BundleRefused
from .plan import Plan

__all__ = ["Written", "write_attachments", "write_plan"]

log = logging.getLogger(__name__)
_DETAIL_LIMIT = 2000


@dataclass
class Written:
    campaign_id: int
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Ids:
    branches: dict[int, int]
    nodes: dict[int, int]


def write_plan(session: Session, plan: Plan) -> Written:
    """A new campaign from `plan`, in the session's transaction (not committed)."""
    campaign = _write_campaign(session, plan)
    ids = _Ids(_write_branches(session, plan, campaign.id), {})
    ids.nodes = _write_nodes(session, plan, campaign.id, ids.branches)
    _write_records(session, plan, ids.nodes)
    _place_head(session, campaign, plan, ids.branches)
    _write_save_points(session, plan, campaign.id, ids.branches)
    _write_memories(session, plan, campaign.id, ids.branches)
    _write_summaries(session, plan, campaign.id, ids.branches)
    _write_events(session, plan, campaign.id, ids.nodes)
    _write_cards(session, plan, campaign.id)
    _write_visual_profiles(session, plan, campaign.id)
    warnings = _write_knowledge(session, plan, campaign.id)
    session.flush()
    return Written(campaign.id, warnings)


def write_attachments(session: Session, plan: Plan, campaign_id: int) -> Written:
    """Cards and knowledge added to an existing campaign."""
    if session.get(CampaignRow, campaign_id) is None:
        raise NotFound(f"There is no campaign {campaign_id} to add to; wb.campaigns() lists them.")
    held = session.scalar(select(func.count()).where(KnowledgeSourceRow.campaign_id == campaign_id)) or 0
    if plan.knowledge and held + len(plan.knowledge) > intake.MAX_SOURCES_PER_CAMPAIGN:
        raise BundleRefused(f"Campaign {campaign_id} holds {held} knowledge sources; adding "
                            f"{len(plan.knowledge)} would pass the limit of {intake.MAX_SOURCES_PER_CAMPAIGN}. "
                            "Nothing was imported.")
    _write_cards(session, plan, campaign_id)
    warnings = _write_knowledge(session, plan, campaign_id)
    session.flush()
    return Written(campaign_id, warnings)


# ------------------------------------------------------------------ the story
def _write_campaign(session: Session, plan: Plan) -> CampaignRow:
    row = CampaignRow(**plan.campaign, head_branch_id=None, head_depth=-1)
    session.add(row)
    session.flush()  # takes the write lock: the ids below cannot be raced
    return row


def _next_id(session: Session, column) -> int:
    return (session.scalar(select(func.max(column))) or 0) + 1


def _write_branches(session: Session, plan: Plan, campaign_id: int) -> dict[int, int]:
    first = _next_id(session, BranchRow.id)
    mapping = {b.key: first + i for i, b in enumerate(plan.branches)}
    rows = [{"id": mapping[b.key], "campaign_id": campaign_id,
             "parent_id": mapping[b.parent] if b.parent is not None else None,
             "fork_depth": b.fork_depth, "created_at": b.created_at} for b in plan.branches]
    session.execute(insert(BranchRow), rows)  # parents first, so each parent row already exists
    return mapping


def _write_nodes(session: Session, plan: Plan, campaign_id: int, branches: dict[int, int]) -> dict[int, int]:
    """Ids follow the file's order (take order is id order); rows go in by
    depth so a parent is always inserted before the takes that name it."""
    first = _next_id(session, NodeRow.id)
    mapping = {n.key: first + i for i, n in enumerate(plan.nodes)}
    rows = [{"id": mapping[n.key], "campaign_id": campaign_id, "branch_id": branches[n.branch], "depth": n.depth,
             "parent_id": mapping[n.parent] if n.parent is not None else None, "kind": n.kind, "text": n.text,
             "raw_text": n.raw_text, "reasoning": n.reasoning, "live": n.live, "edited": n.edited,
             "state_after": n.state_after, "created_at": n.created_at}
            for n in sorted(plan.nodes, key=lambda n: n.depth)]
    if rows:
        session.execute(insert(NodeRow), rows)
    return mapping


def _write_records(session: Session, plan: Plan, nodes: dict[int, int]) -> None:
    """Through the turn record's one writer, already in stored form."""
    write_stored(session, [{"node_id": nodes[n.key], **{k: getattr(n.record, k) for k in STORED_FIELDS}}
                           for n in plan.nodes if n.record is not None], plan.texts)


def _place_head(session: Session, campaign: CampaignRow, plan: Plan, branches: dict[int, int]) -> None:
    branch, depth = plan.head
    campaign.head_branch_id, campaign.head_depth = branches[branch], depth
    session.flush()


def _bulk(session: Session, table, rows: list[dict]) -> None:
    if rows:
        session.execute(insert(table), rows)


def _write_save_points(session: Session, plan: Plan, campaign_id: int, branches: dict[int, int]) -> None:
    _bulk(session, SavePointRow, [
        {"campaign_id": campaign_id, "name": p.name, "note": p.note, "branch_id": branches[p.branch],
         "depth": p.depth, "created_at": p.created_at} for p in plan.save_points])


def _write_memories(session: Session, plan: Plan, campaign_id: int, branches: dict[int, int]) -> None:
    """Vectors are not carried: `vector_model` "" makes every memory pending,
    and the next embedding pass (or the import's own) rebuilds them."""
    _bulk(session, MemoryRow, [
        {"campaign_id": campaign_id, "text": m.text, "branch_id": branches[m.branch] if m.branch is not None else None,
         "depth": m.depth, "source_start": m.source_start, "source_end": m.source_end, "authority": m.authority,
         "pinned": m.pinned, "forgotten": m.forgotten, "use_count": m.use_count, "last_used_at": m.last_used_at,
         "vector": None, "vector_model": "", "created_at": m.created_at} for m in plan.memories])


def _write_summaries(session: Session, plan: Plan, campaign_id: int, branches: dict[int, int]) -> None:
    _bulk(session, SummaryRow, [
        {"campaign_id": campaign_id, "text": s.text, "branch_id": branches[s.branch], "depth": s.depth,
         "source_start": s.source_start, "source_end": s.source_end, "trigger": s.trigger,
         "model_name": s.model_name, "created_at": s.created_at} for s in plan.summaries])


def _write_events(session: Session, plan: Plan, campaign_id: int, nodes: dict[int, int]) -> None:
    _bulk(session, StateEventRow, [
        {"campaign_id": campaign_id, "node_id": nodes[e.node] if e.node is not None else None, "source": e.source,
         "event": e.event, "accepted": e.accepted, "reason": e.reason, "note": e.note, "created_at": e.created_at}
        for e in plan.events])


def _write_cards(session: Session, plan: Plan, campaign_id: int) -> None:
    _bulk(session, StoryCardRow, [
        {"campaign_id": campaign_id, "title": c.title, "keys": c.keys, "entry": c.entry, "card_type": c.card_type,
         "notes": c.notes, "created_at": c.created_at, "constant": c.constant, "enabled": c.enabled,
         "origin": c.origin, "secondary_keys": c.secondary_keys, "logic": c.logic} for c in plan.cards])


def _write_visual_profiles(session: Session, plan: Plan, campaign_id: int) -> None:
    _bulk(session, VisualProfileRow, [
        {"campaign_id": campaign_id, "entity_key": v.entity_key, "descriptors": v.descriptors,
         "features": v.features, "style_notes": v.style_notes, "created_at": v.created_at,
         "updated_at": v.updated_at} for v in plan.visual_profiles])


# ------------------------------------------------------------------ knowledge
def _write_knowledge(session: Session, plan: Plan, campaign_id: int) -> list[str]:
    """Sources as carried; passages and the lexical index rebuilt from their
    text by the knowledge package's own path. A source whose index cannot be
    built is kept (marked failed, with the reason) and reported: the text
    arrived intact and Reindex can try again."""
    warnings = []
    for k in plan.knowledge:
        source = KnowledgeSourceRow(
            campaign_id=campaign_id, title=k.title, original_filename=k.original_filename,
            classification=k.classification, enabled=k.enabled, visibility=k.visibility,
            always_include=k.always_include, content_hash=digest(k.content), content=k.content,
            byte_size=len(k.content.encode("utf-8")), media_type=k.media_type, parser_version=PARSER_VERSION,
            chunking_version=CHUNKING_VERSION, index_state="pending", notes=k.notes, imported_at=k.imported_at,
            updated_at=k.updated_at)
        session.add(source)
        session.flush()
        problem = _index(session, source)
        if problem:
            warnings.append(f"The search index for “{k.title}” could not be rebuilt ({problem}). Its text imported "
                            "intact; reindex it from the knowledge library to try again.")
    return warnings


def _index(session: Session, source: KnowledgeSourceRow) -> str:
    """Build one source's passages inside a savepoint; '' or what went wrong."""
    updated_at = source.updated_at
    try:
        with session.begin_nested():
            build_passages(session, source)
    except Exception as exc:  # noqa: BLE001 - recorded on the source and reported, never fatal
        log.warning("Rebuilding the index of imported source %s failed", source.id, exc_info=True)
        detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_LIMIT]
        source.index_state, source.index_detail = "failed", detail
        return detail
    source.updated_at = updated_at  # the reader's last change, not the rebuild
    return ""
