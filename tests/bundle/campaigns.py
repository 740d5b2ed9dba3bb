"""Campaigns to move, and a snapshot of everything a move must keep.

The snapshot is built straight from the tables (not through the exporter),
with ids renumbered in id order, so two databases can be compared field by
field. It is plain JSON so a second process can print it.
"""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from narrators import BagOfWordsEmbedder, ScriptedNarrator
from sqlalchemy import select

from engine.knowledge import Library
from engine.store import BranchRow, CampaignRow, NodeRow, SavePointRow, TurnRecordRow
from engine.store.cards_tables import StoryCardRow
from engine.store.knowledge_tables import KnowledgePassageRow, KnowledgeSourceRow
from engine.store.memory_tables import MemoryRow, SummaryRow
from engine.store.narrative_tables import StateEventRow
from engine.turns import record

BLOCK = ('Mara hands you the silver key.\n\n```state\n{"events": ['
         '{"type": "create_entity", "entity": "ila", "entity_type": "character", "name": "Ila"}, '
         '{"type": "create_entity", "entity": "mara", "entity_type": "character", "name": "Mara"}, '
         '{"type": "create_entity", "entity": "silver-key", "entity_type": "item", "name": "Silver key"}, '
         '{"type": "set_possession", "item": "silver-key", "owner": "ila"}, '
         '{"type": "set_possession", "item": "ghost-item", "owner": "nobody"}]}\n```')
REPLIES = [BLOCK, "The crypt stair is cold.", "Water drips somewhere below.", "The door groans open.",
           "The tavern fire is low.", "Mara watches the door."]
CANON = "# Westhaven\n\nThe dead do not return. The abbey crypt lies under the north chapel.\n"
SECRET = "# Mara's secret\n\nMara buried her brother in the abbey crypt and tells no one.\n"
DRAFT = "# Draft notes\n\nPerhaps the silver key opens the crypt door.\n"
CARDS = [{"keys": "Mara,innkeeper", "value": "Mara keeps the Crooked Lantern.", "type": "character",
          "title": "Mara", "description": "from the scenario"},
         {"keys": ["crypt"], "value": "A vault under the north chapel.", "type": "location", "title": "Crypt"}]


def configure(wb) -> BagOfWordsEmbedder:
    embedder = BagOfWordsEmbedder()
    wb.configure(narrator=ScriptedNarrator(REPLIES, reasoning="Thinking about Mara."), embedder=embedder)
    return embedder


def build_rich(wb):
    """Forks, retries, a take switch, an edit, undo, save points, memories,
    summaries, knowledge, corrections and story cards; left undone."""
    embedder = configure(wb)
    camp = wb.new_campaign("Moved between machines", premise="A port town under quarantine.", protagonist="Ila",
                           opening="Ila sits in the Crooked Lantern with Mara.", ai_instructions="Keep it grim.",
                           authors_note="It is raining.")
    with wb.db.writing() as s:
        row = s.get(CampaignRow, camp.id)
        row.canon = {"rules": ["The dead do not return."], "forbidden_status_changes": [{"from": "dead",
                                                                                         "to": "alive"}]}
        row.narration_length = "brief"
    library = Library(wb.db, camp.id, lambda: embedder, progress=False)
    library.add("canon.md", CANON, classification="canon", always_include=True)
    secret = library.add("secret.md", SECRET, classification="canon")
    library.hide(secret["id"])
    draft = library.add("draft.md", DRAFT, classification="reference", notes="unsure")
    library.disable(draft["id"])
    wb.import_ai_dungeon(CARDS, campaign_id=camp.id)
    camp.act("ask Mara for the key")
    camp.memories.add("Mara gave Ila the silver key.", pinned=True)
    second = camp.act("go down to the crypt")
    camp.retry()
    camp.select_take(1, second.id)
    camp.save_point("At the door", note="before the crypt")
    camp.act("open the crypt door")
    camp.set_summary("Ila took the key from Mara and went down to the crypt.")
    camp.correct({"type": "set_possession", "item": "silver-key", "owner": "mara"}, note="Mara kept it.")
    camp.undo()
    camp.undo()
    camp.act("turn back to the tavern")  # behind the tip: a fork
    camp.edit(camp.history()[-1].id, "The tavern is warm; Mara pours cider.")
    camp.save_point("Back at the tavern")
    camp.act("sit by the fire")
    camp.undo()  # exported undone: the future stays for Redo
    return camp


def _iso(value):
    return value.isoformat() if isinstance(value, datetime) else value


def snapshot(wb, campaign_id: int) -> dict:
    """Every field of one campaign, with local ids, as JSON values."""
    camp = wb.campaign(campaign_id)
    with wb.db.reading() as s:
        c = s.get(CampaignRow, campaign_id)
        branches = list(s.scalars(select(BranchRow).where(BranchRow.campaign_id == campaign_id).order_by(BranchRow.id)))
        bkey = {b.id: i for i, b in enumerate(branches)}
        nodes = list(s.scalars(select(NodeRow).where(NodeRow.campaign_id == campaign_id).order_by(NodeRow.id)))
        nkey = {n.id: i for i, n in enumerate(nodes)}
        records = {r.node_id: r for r in s.scalars(select(TurnRecordRow).where(TurnRecordRow.node_id.in_(list(nkey))))}

        def rows(model):
            return list(s.scalars(select(model).where(model.campaign_id == campaign_id).order_by(model.id)))

        out = {
            "campaign": {k: _iso(getattr(c, k)) for k in ("title", "premise", "protagonist", "ai_instructions",
                                                          "authors_note", "narration_length", "canon", "state",
                                                          "created_at", "updated_at")},
            "head": [bkey.get(c.head_branch_id), c.head_depth],
            "branches": [[bkey.get(b.parent_id), b.fork_depth, _iso(b.created_at)] for b in branches],
            "nodes": [[bkey[n.branch_id], n.depth, nkey.get(n.parent_id), n.kind, n.text, n.raw_text, n.reasoning,
                       n.live, n.edited, n.state_after, _iso(n.created_at)] for n in nodes],
            # the report as a reader sees it (exact prompt rebuilt), not its stored form
            "records": [[nkey[i], r.narrator, dict(record.load(s, s.get(NodeRow, i)).report), r.usage, r.accounting,
                         r.window, r.timings] for i, r in sorted(records.items())],
            "save_points": [[p.name, p.note, bkey[p.branch_id], p.depth, _iso(p.created_at)] for p in rows(SavePointRow)],
            "events": [[nkey.get(e.node_id), e.source, e.event, e.accepted, e.reason, e.note, _iso(e.created_at)]
                       for e in rows(StateEventRow)],
            "memories": [[m.text, bkey.get(m.branch_id), m.depth, m.source_start, m.source_end, m.authority, m.pinned,
                          m.forgotten, m.use_count, _iso(m.last_used_at), _iso(m.created_at), bool(m.vector_model)]
                         for m in rows(MemoryRow)],
            "summaries": [[m.text, bkey.get(m.branch_id), m.depth, m.source_start, m.source_end, m.trigger,
                           m.model_name, _iso(m.created_at)] for m in rows(SummaryRow)],
            "knowledge": [[k.title, k.original_filename, k.classification, k.enabled, k.visibility, k.always_include,
                           k.content_hash, k.content, k.index_state, k.media_type, k.notes, _iso(k.imported_at),
                           s.query(KnowledgePassageRow).filter_by(source_id=k.id).count() > 0]
                          for k in rows(KnowledgeSourceRow)],
            "cards": [[k.title, k.keys, k.entry, k.card_type, k.notes, _iso(k.created_at)] for k in rows(StoryCardRow)],
        }
    out["transcript"] = [[e.kind, e.text, e.depth, e.take, e.takes, e.edited] for e in camp.history()]
    out["can"] = [camp.can_undo, camp.can_redo, camp.can_retry]
    out["state_now"] = camp.state
    out["save_point_views"] = [[p.name, p.note, p.depth] for p in camp.save_points()]
    out["summary_now"] = camp.summary
    out["retrieved"] = [p.title for p in Library(wb.db, campaign_id, progress=False)
                        .retrieve("the abbey crypt under the north chapel", budget_tokens=2000).passages]
    return json.loads(json.dumps(out, default=str))


def census(path) -> dict[str, int]:
    """Rows in every table of the file, virtual and shadow tables included."""
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()
