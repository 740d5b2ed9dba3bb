"""The one place a turn is written, and the one writer of state events.

A played turn, a retry, a continuation and an edit all end here, inside the
caller's write transaction, so "what a turn writes" is decided once: the
input node, the take, its state snapshot and events, its record, and the
memories it used. The path is plan -> take -> record: the plan (`plan.Plan`)
says where the take goes and what was shown, the take carries it with what
came back, and the record (`Turn`) is built here, once, from the two.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import memory, narrative
from ..context import Report
from ..store import CampaignRow, NodeRow, TurnRecordRow
from ..store.models import utcnow
from ..store.narrative_tables import StateEventRow
from ..story import StoryTree
from .plan import Plan
from .record import Turn, write_record

__all__ = ["Take", "edit_take", "write_state", "write_turn"]


@dataclass(frozen=True)
class Take:
    """What came back for a plan, ready to write: the reply as it is stored,
    the narrator's own text, what it proposed, and what it cost. Gathered
    before the write transaction opens."""

    plan: Plan
    prose: str
    raw: str
    extraction: narrative.Extraction
    reasoning: str | None = None
    edited: bool = False
    narrator: str = ""
    usage: dict = field(default_factory=dict)
    accounting: dict = field(default_factory=dict)
    window: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


def edit_take(node_id: int, state_before: dict, text: str, extraction: narrative.Extraction) -> Take:
    """A corrected narration: a new take beside `node_id`, with no narrator
    call behind it and so no record of a prompt."""
    return Take(Plan(state_before, retry_of=node_id), extraction.prose.strip(), text, extraction, edited=True)


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
    if take.plan.built is None:
        return list(take.plan.memory_ids)
    used = Report(dict(take.plan.built.report)).used("memories")
    return [m["id"] for m in used if m.get("unit", "memory") == "memory" and isinstance(m.get("id"), int)]


def write_turn(session, campaign: CampaignRow, take: Take) -> Turn:
    """Write one take (and its input) at the head, in the caller's transaction,
    and its record, which comes back: nobody reads it again."""
    plan = take.plan
    tree = StoryTree(session, campaign)
    node = _write_node(session, tree, take)
    session.flush()
    outcome = write_state(session, campaign, node, plan.state_before, take.extraction.events or [], source="narrator")
    turn = _record(session, tree, node, take, outcome)
    if plan.built is not None:
        write_record(session, node.id, turn, plan.history, plan.recent)
    memory.record_use(session, _memories_shown(take))
    campaign.updated_at = utcnow()
    session.flush()
    return turn


def _write_node(session, tree: StoryTree, take: Take) -> NodeRow:
    """The narration node the take is written to (after its input's, if any)."""
    plan = take.plan
    fields = {"raw_text": take.raw, "reasoning": take.reasoning, "edited": take.edited}
    if plan.extend_of is not None:
        node = tree.node(plan.extend_of)
        tree.revise(node, take.prose, reason="continued", record=_set_aside_record(session, node.id))
        return node
    if plan.retry_of is not None:
        return tree.add_take(tree.node(plan.retry_of), take.prose, plan.state_before, **fields)
    if plan.input_kind:
        tree.append(plan.input_kind, plan.input_text, plan.state_before)
    return tree.append("narrator", take.prose, plan.state_before, **fields)


def _record(session, tree: StoryTree, node: NodeRow, take: Take, outcome: narrative.Outcome) -> Turn:
    """The take's record: the story's fields from its node, the narrator's
    from the take, and the report as built with what the take changed."""
    plan, takes = take.plan, tree.takes(node)
    parent = session.get(NodeRow, node.parent_id) if node.parent_id else None
    report = None
    if plan.built is not None:
        report = Report({**plan.built.report, "narrative": _changes(plan.state_before, outcome, take.extraction)})
    return Turn(node.id, node.text, node.depth,
                input=parent.text if parent is not None and parent.kind in ("player", "direction") else None,
                reasoning=node.reasoning, take=[n.id for n in takes].index(node.id) + 1, takes=len(takes),
                narrator=take.narrator, usage=take.usage, accounting=take.accounting, window=take.window,
                timings=take.timings, report_from=report)
