"""The one place a turn is written, and the one writer of state events.

A played turn, a retry and an edit all end here, inside the caller's write
transaction, so "what a turn writes" is decided once: the input node, the
take, its state snapshot and events, its record, and the memories it used.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import memory, narrative
from ..context import Report
from ..store import CampaignRow, NodeRow, TurnRecordRow
from ..store.models import utcnow
from ..store.narrative_tables import StateEventRow
from ..story import StoryTree
from .record import HistoryRef, Turn, write_record

__all__ = ["Take", "write_state", "write_turn"]


@dataclass(frozen=True)
class Take:
    """Everything one turn writes, gathered before the write transaction opens."""

    prose: str
    raw: str
    state_before: dict
    extraction: Any  # narrative.Extraction
    reasoning: str | None = None
    retry_of: int | None = None  # write a new take beside this narration
    input_kind: str | None = None  # "player" | "direction" | None for a continue
    input_text: str = ""
    edited: bool = False
    # What the narrator was given and what came back (absent for an edit): a
    # Turn whose story fields are filled in when it is written.
    record: Turn | None = None
    history: HistoryRef | None = None  # the history section as a depth range, when it can be
    memory_ids: Sequence[int] = field(default_factory=tuple)
    extend_of: int | None = None  # write the prose over this narration, as a new revision of it (Continue)


def write_state(session, campaign: CampaignRow, node: NodeRow, state: dict, events, *, source: str,
                note: str = "") -> narrative.Outcome:
    """Apply `events` to `state` at `node`: the node keeps the result as its
    snapshot, the head takes it, and every event is kept for the audit list,
    applied or refused."""
    outcome = narrative.apply(state, events, source=source, at={"branch_id": node.branch_id, "depth": node.depth})
    node.state_after = outcome.state
    campaign.state = outcome.state
    for item in outcome.accepted:
        session.add(StateEventRow(campaign_id=campaign.id, node_id=node.id, source=source, event=item["event"],
                                  note=note))
    for event, reason in outcome.rejected:
        session.add(StateEventRow(campaign_id=campaign.id, node_id=node.id, source=source,
                                  event=event if isinstance(event, dict) else {"raw": repr(event)},
                                  accepted=False, reason=str(reason), note=note))
    return outcome


def _changes(before: dict, outcome, extraction) -> dict:
    return {"proposed": extraction.events is not None, "accepted": len(outcome.accepted),
            "rejected": [{"event": e, "reason": str(r)} for e, r in outcome.rejected],
            "removals": [{"rule": rule, "text": text[:300]} for rule, text in extraction.removals],
            "changes": narrative.describe_diff(narrative.diff(before, outcome.state))}


def _set_aside_record(session, node_id: int) -> dict | None:
    """A narration's record, taken off it before a continuation writes its own
    (kept with the revision, so the first reply's measurements stay)."""
    row = session.get(TurnRecordRow, node_id)
    if row is None:
        return None
    kept = {"narrator": row.narrator, "report": row.report, "usage": row.usage, "accounting": row.accounting,
            "window": row.window, "timings": row.timings}
    session.delete(row)
    session.flush()
    return kept


def _memories_shown(take: Take) -> list[int]:
    """The memories the prompt carried: the builder keeps some of the recall's
    candidates (those outside the history window that fit its share)."""
    if take.record is None:
        return list(take.memory_ids)
    used = Report(dict(take.record.report)).used("memories")
    return [m["id"] for m in used if m.get("unit", "memory") == "memory" and isinstance(m.get("id"), int)]


def write_turn(session, campaign: CampaignRow, take: Take) -> Turn:
    """Write one take (and its input) at the head, in the caller's transaction;
    the record it wrote comes back, so nobody reads it again."""
    tree = StoryTree(session, campaign)
    state = take.state_before
    fields = {"raw_text": take.raw, "reasoning": take.reasoning, "edited": take.edited}
    if take.extend_of is not None:
        node = tree.node(take.extend_of)
        tree.revise(node, take.prose, reason="continued", record=_set_aside_record(session, node.id))
    elif take.retry_of is not None:
        node = tree.add_take(tree.node(take.retry_of), take.prose, state, **fields)
    else:
        if take.input_kind:
            tree.append(take.input_kind, take.input_text, state)
        node = tree.append("narrator", take.prose, state, **fields)
    session.flush()
    outcome = write_state(session, campaign, node, state, take.extraction.events or [], source="narrator")
    record = take.record or Turn(0, "", 0)
    if take.record is not None:
        report = Report({**take.record.report, "narrative": _changes(state, outcome, take.extraction)})
        record = replace(record, report_from=report)
        write_record(session, node.id, record, take.history)
    memory.record_use(session, _memories_shown(take))
    campaign.updated_at = utcnow()
    session.flush()
    takes = tree.takes(node)
    parent = session.get(NodeRow, node.parent_id) if node.parent_id else None
    return replace(record, id=node.id, text=node.text, depth=node.depth, reasoning=node.reasoning,
                   input=parent.text if parent is not None and parent.kind in ("player", "direction") else None,
                   take=[n.id for n in takes].index(node.id) + 1, takes=len(takes))
