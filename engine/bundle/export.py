"""One campaign as one JSON document (this workbench's format, version 2).

Read in a single read transaction, so a turn committing meanwhile is either
wholly in the file or not at all. Ids become local to the file: branches are
numbered parents-first and nodes in their original order (which is take
order). What belongs to the machine stays behind: settings, paths, vectors,
passages, the derived-work status.
"""
from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, undefer

from ..errors import NotFound
from ..store import BranchRow, CampaignRow, NodeRow, SavePointRow, TurnRecordRow
from ..store.cards_tables import StoryCardRow
from ..store.knowledge_tables import KnowledgeSourceRow
from ..store.media_tables import VisualProfileRow
from ..store.memory_tables import MemoryRow, SummaryRow
from ..store.narrative_tables import StateEventRow
from ..turns.record import STORED_FIELDS, hashes_of, stored_rows, stored_texts
from .native import FORMAT, VERSION

__all__ = ["build_bundle", "scrub"]

REDACTED = "[removed: machine-specific]"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def build_bundle(session: Session, campaign_id: int, machine: tuple[str, ...] = ()) -> tuple[dict, int]:
    """(the bundle, how many values had machine-specific text removed)."""
    # The caller's reading session is one snapshot for every read below.
    campaign = session.get(CampaignRow, campaign_id)
    if campaign is None:
        raise NotFound(f"There is no campaign {campaign_id} to export.")
    branches = _parents_first(list(session.scalars(
        select(BranchRow).where(BranchRow.campaign_id == campaign_id).order_by(BranchRow.id))))
    branch_key = {b.id: i + 1 for i, b in enumerate(branches)}
    nodes = list(session.scalars(select(NodeRow).options(undefer(NodeRow.state_after))
                                 .where(NodeRow.campaign_id == campaign_id).order_by(NodeRow.id)))
    node_key = {n.id: i + 1 for i, n in enumerate(nodes)}
    records = {r.node_id: r for r in stored_rows(session, node_key)}
    scrubbed = [0]
    bundle = {
        "format": FORMAT, "version": VERSION, "exported_at": _iso(datetime.now().astimezone()),
        "campaign": _campaign(campaign),
        "head": {"branch": branch_key.get(campaign.head_branch_id), "depth": campaign.head_depth},
        "branches": [{"id": branch_key[b.id], "parent": branch_key.get(b.parent_id), "fork_depth": b.fork_depth,
                      "created_at": _iso(b.created_at)} for b in branches],
        "nodes": [_node(n, branch_key, node_key, records.get(n.id), machine, scrubbed) for n in nodes],
        "prompt_texts": _texts(session, records.values(), machine, scrubbed),
        **_sections(session, campaign_id, branch_key, node_key),
    }
    return bundle, scrubbed[0]


def _texts(session: Session, records, machine, scrubbed) -> dict[str, str]:
    """The prompt texts the records refer to, each once (a v3 record keeps
    long texts by hash; see engine.turns.record)."""
    wanted: set[str] = set()
    for r in records:
        wanted |= hashes_of(r.report or {})
    texts = stored_texts(session, wanted)
    if machine and _mentions(texts, machine):
        texts, count = scrub(texts, machine)  # the reader re-keys a text whose hash no longer matches
        scrubbed[0] += count
    return dict(sorted(texts.items()))


def _parents_first(branches: list[BranchRow]) -> list[BranchRow]:
    """Ids already run parents-first in practice; this makes it a guarantee."""
    placed: set[int] = set()
    ordered: list[BranchRow] = []
    waiting = list(branches)
    while waiting:
        ready = [b for b in waiting if b.parent_id is None or b.parent_id in placed]
        if not ready:  # a cycle cannot be written by the engine; keep the rest in id order
            ready = waiting
        for b in ready:
            placed.add(b.id)
            ordered.append(b)
        waiting = [b for b in waiting if b.id not in placed]
    return ordered


def _campaign(c: CampaignRow) -> dict:
    return {"title": c.title, "premise": c.premise, "protagonist": c.protagonist,
            "ai_instructions": c.ai_instructions, "authors_note": c.authors_note,
            "narration_length": c.narration_length, "canon": c.canon or {}, "state": c.state or {},
            "created_at": _iso(c.created_at), "updated_at": _iso(c.updated_at)}


def _node(n: NodeRow, branch_key, node_key, record: TurnRecordRow | None, machine, scrubbed) -> dict:
    out = {"id": node_key[n.id], "branch": branch_key[n.branch_id], "depth": n.depth,
           "parent": node_key.get(n.parent_id), "kind": n.kind, "text": n.text, "raw_text": n.raw_text,
           "reasoning": n.reasoning, "live": bool(n.live), "edited": bool(n.edited),
           "state_after": n.state_after or {}, "created_at": _iso(n.created_at), "record": None}
    if record is not None:
        fields = {name: getattr(record, name) or ({} if name != "narrator" else "") for name in STORED_FIELDS}
        if machine and _mentions(fields, machine):
            fields, count = scrub(fields, machine)
            scrubbed[0] += count
        out["record"] = fields
    return out


def _mentions(value: Any, machine: tuple[str, ...]) -> bool:
    """The cheap test first: most records name no machine at all."""
    text = json.dumps(value, ensure_ascii=False)
    return any(needle in text or json.dumps(needle)[1:-1] in text for needle in machine)


def scrub(value: Any, machine: tuple[str, ...]) -> tuple[Any, int]:
    """A copy of `value` with every machine-specific string (the endpoint,
    the database's path) replaced, and how many strings were touched. Turn
    evidence is otherwise carried verbatim."""
    if not machine:
        return value, 0
    if isinstance(value, str):
        cleaned = value
        for needle in machine:
            cleaned = cleaned.replace(needle, REDACTED)
        return cleaned, int(cleaned != value)
    if isinstance(value, dict):
        pairs = [(k, *scrub(v, machine)) for k, v in value.items()]
        return {k: v for k, v, _ in pairs}, sum(c for _, _, c in pairs)
    if isinstance(value, list):
        pairs = [scrub(v, machine) for v in value]
        return [v for v, _ in pairs], sum(c for _, c in pairs)
    return copy.copy(value), 0


def _sections(session: Session, campaign_id: int, branch_key: dict, node_key: dict) -> dict:
    def rows(model, order):
        return session.scalars(select(model).where(model.campaign_id == campaign_id).order_by(order))

    return {
        "save_points": [{"name": p.name, "note": p.note, "branch": branch_key[p.branch_id], "depth": p.depth,
                         "created_at": _iso(p.created_at)} for p in rows(SavePointRow, SavePointRow.id)],
        "memories": [{"text": m.text, "branch": branch_key.get(m.branch_id), "depth": m.depth,
                      "source_start": m.source_start, "source_end": m.source_end, "authority": m.authority,
                      "pinned": bool(m.pinned), "forgotten": bool(m.forgotten), "use_count": m.use_count,
                      "last_used_at": _iso(m.last_used_at), "created_at": _iso(m.created_at)}
                     for m in rows(MemoryRow, MemoryRow.id)],
        "summaries": [{"text": s.text, "branch": branch_key.get(s.branch_id), "depth": s.depth,
                       "source_start": s.source_start, "source_end": s.source_end, "trigger": s.trigger,
                       "model_name": s.model_name, "created_at": _iso(s.created_at)}
                      for s in rows(SummaryRow, SummaryRow.id)],
        "state_events": [{"node": node_key.get(e.node_id), "source": e.source, "event": e.event,
                          "accepted": bool(e.accepted), "reason": e.reason, "note": e.note,
                          "created_at": _iso(e.created_at)} for e in rows(StateEventRow, StateEventRow.id)],
        "knowledge": [{"title": k.title, "original_filename": k.original_filename,
                       "classification": k.classification, "enabled": bool(k.enabled), "visibility": k.visibility,
                       "always_include": bool(k.always_include), "content": k.content,
                       "content_hash": k.content_hash, "media_type": k.media_type, "notes": k.notes,
                       "imported_at": _iso(k.imported_at), "updated_at": _iso(k.updated_at)}
                      for k in session.scalars(select(KnowledgeSourceRow).options(undefer(KnowledgeSourceRow.content))
                                               .where(KnowledgeSourceRow.campaign_id == campaign_id)
                                               .order_by(KnowledgeSourceRow.id))],
        "story_cards": [{"title": c.title, "keys": list(c.keys or []), "entry": c.entry, "card_type": c.card_type,
                         "notes": c.notes, "created_at": _iso(c.created_at), "constant": bool(c.constant),
                         "enabled": bool(c.enabled), "origin": c.origin, "secondary_keys": list(c.secondary_keys or []),
                         "logic": c.logic or "and_any"} for c in rows(StoryCardRow, StoryCardRow.id)],
        # Only entities that have one: an unprofiled entity writes no empty row.
        "visual_profiles": [{"entity_key": v.entity_key, "descriptors": v.descriptors or {},
                             "features": v.features or [], "style_notes": v.style_notes or "",
                             "created_at": _iso(v.created_at), "updated_at": _iso(v.updated_at)}
                            for v in rows(VisualProfileRow, VisualProfileRow.entity_key)],
    }
