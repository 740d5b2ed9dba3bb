"""The office campaign: a depictable scene that is deliberately not fantasy.

Played through real turns: a scripted narrator emits the state blocks, the
engine extracts and applies them. Bill, Alice and Roger meet in the office;
Bill carries the security badge; John exists but is elsewhere; the server
room waits for a divergence. Alice and the office have visual profiles,
Roger has none (so "no profile" can be told from "an empty one").
"""
from __future__ import annotations

import json

from narrators import CountingNarrator, ScriptedNarrator
from sqlalchemy import func, select

from engine.store import NodeRow, TurnRecordRow
from engine.store.memory_tables import MemoryRow, SummaryRow
from engine.store.narrative_tables import StateEventRow

CAST = [
    ("bill", "character", "Bill"),
    ("alice", "character", "Alice"),
    ("roger", "character", "Roger"),
    ("john", "character", "John"),
    ("office", "location", "The office"),
    ("server_room", "location", "The server room"),
    ("badge", "item", "Security badge"),
]
SUMMARY = "Bill, Alice and Roger meet around the table."
ALICE = {"descriptors": {"build": "tall", "hair": "short black", "clothing": "grey blazer"},
         "features": ["tortoiseshell glasses"], "style_notes": "photographic, natural light"}
OFFICE = {"descriptors": {"architecture": "open-plan floor", "lighting": "flat fluorescent"},
          "features": ["whiteboard covered in diagrams"], "style_notes": ""}
OPENING = "Monday starts with the hum of the air conditioning."


def block(prose: str, events: list[dict]) -> str:
    """A narration followed by the state block the engine extracts."""
    return f"{prose}\n\n```state\n{json.dumps({'events': events})}\n```"


ARRIVE = block("You arrive at the office. The printer is jammed again.",
               [{"type": "create_entity", "entity": key, "entity_type": kind, "name": name}
                for key, kind, name in CAST])
MEET = block("The meeting starts around the long table.", [
    {"type": "set_possession", "item": "badge", "owner": "bill"},
    {"type": "set_scene", "summary": SUMMARY, "location": "office", "present": ["bill", "alice", "roger"]},
])


def build(wb, *, profiles: bool = True):
    """The campaign after its two turns (and, by default, its two profiles);
    the narrator is left counting, so later turns change no state."""
    wb.configure(narrator=ScriptedNarrator([ARRIVE, MEET]))
    camp = wb.new_campaign("The office", premise="An ordinary Monday at a small software firm.",
                           protagonist="Bill", opening=OPENING)
    camp.act("arrive at the office")
    camp.act("start the meeting")
    wb.configure(narrator=CountingNarrator())
    if profiles:
        camp.set_visual_profile("alice", **ALICE)
        camp.set_visual_profile("office", **OFFICE)
    return camp


def authoritative(camp) -> dict:
    """Everything that is the story: the state, the head, and how many nodes,
    records, events, memories and summaries exist."""
    with camp._db.reading() as s:
        def count(model):
            return s.scalar(select(func.count()).select_from(model).where(model.campaign_id == camp.id))
        records = s.scalar(select(func.count()).select_from(TurnRecordRow)
                           .join(NodeRow, NodeRow.id == TurnRecordRow.node_id).where(NodeRow.campaign_id == camp.id))
        return {"state": camp.state, "head": camp.head, "nodes": count(NodeRow), "records": records,
                "events": count(StateEventRow), "memories": count(MemoryRow), "summaries": count(SummaryRow)}
