"""Build a long campaign fast, by writing its rows directly.

Playing 10,000 turns through the engine would take the better part of an
hour on this machine; what a benchmark needs is the *shape* a long campaign
leaves in the file (one line of nodes, a memory every six story nodes with its
vector, a summary every fifteen, and with `line_vectors` every played line's
vector as derived work leaves it), after which it plays real turns on top.
"""
from __future__ import annotations

import copy

import numpy as np
from sqlalchemy import func, insert, select

from engine.memory.lines import spoken, text_hash
from engine.memory.vectors import pack
from engine.store import CampaignRow, NodeRow, TurnRecordRow
from engine.store.memory_tables import MemoryRow, SummaryRow, TextVectorRow
from engine.store.models import utcnow

PLACES = ("harbour", "chapel", "market", "lighthouse", "crypt", "tannery", "bridge", "mill")


def template_record(db, node_id: int) -> dict:
    """A real take's record, to be copied onto grown narrations."""
    with db.reading() as s:
        r = s.get(TurnRecordRow, node_id)
        return {"narrator": r.narrator, "report": r.report, "usage": r.usage, "window": r.window,
                "accounting": r.accounting, "timings": r.timings}


def _record_for(template: dict, node_id: int, depth: int) -> dict:
    """The template with its history range moved to end just before `depth`."""
    report = copy.deepcopy(template["report"])
    for section in report.get("sections", []):
        if "nodes" in section:
            span = section["nodes"][1] - section["nodes"][0]
            section["nodes"] = [max(0, depth - 2 - span), depth - 2]
    return {**template, "node_id": node_id, "report": report}


def grow(db, campaign_id: int, turns: int, embedder, template: dict | None = None, line_vectors: bool = False) -> None:
    """Append `turns` player/narrator pairs at the head, with the memories and
    summaries derived work would have written for them (and, given a real
    record as `template`, a record per narration shaped like it; with
    `line_vectors`, each new line's vector, as a campaign played that long
    has them: left to derived work, 256 a turn, a 10,000-turn story is still
    being embedded while it is timed)."""
    now = utcnow()
    with db.writing() as s:
        campaign = s.get(CampaignRow, campaign_id)
        branch, depth = campaign.head_branch_id, campaign.head_depth
        next_id = (s.scalar(select(func.max(NodeRow.id))) or 0) + 1
        parent = s.scalar(select(NodeRow.id).where(NodeRow.branch_id == branch, NodeRow.depth == depth))
        nodes, memories, summaries = [], [], []
        for i in range(turns):
            place = PLACES[i % len(PLACES)]
            for kind, text in (("player", f"> You ask about the {place}, time {i}."),
                               ("narrator", f"The {place} is quiet at beat {i}; Mara counts the bells and "
                                            f"the tide turns against the {PLACES[(i * 3) % len(PLACES)]}.")):
                depth += 1
                nodes.append({"id": next_id, "campaign_id": campaign_id, "branch_id": branch, "depth": depth,
                              "parent_id": parent, "kind": kind, "text": text, "raw_text": text, "live": True,
                              "edited": False, "state_after": {}, "created_at": now})
                parent, next_id = next_id, next_id + 1
            if depth % 6 == 0:
                memories.append((depth, f"Aldric learned about the {place} at beat {i} from Mara."))
            if depth % 30 == 0:
                summaries.append({"campaign_id": campaign_id, "text": f"Aldric has walked the town {i} times.",
                                  "branch_id": branch, "depth": depth, "source_start": depth - 29,
                                  "source_end": depth, "trigger": "interval", "model_name": "", "created_at": now})
        s.execute(insert(NodeRow), nodes)
        if template is not None:
            s.execute(insert(TurnRecordRow), [_record_for(template, n["id"], n["depth"]) for n in nodes
                                              if n["kind"] == "narrator"])
        vectors = np.asarray(embedder.embed([t for _, t in memories]), dtype=np.float32) if memories else []
        s.execute(insert(MemoryRow), [
            {"campaign_id": campaign_id, "text": t, "branch_id": branch, "depth": d, "source_start": d - 5,
             "source_end": d, "authority": "accepted_story", "pinned": False, "forgotten": False, "use_count": 0,
             "vector": pack(v), "vector_model": embedder.model_id, "created_at": now}
            for (d, t), v in zip(memories, vectors, strict=True)])
        if summaries:
            s.execute(insert(SummaryRow), summaries)
        if line_vectors:
            texts = {text_hash(n["text"]): spoken(n["kind"], n["text"]) for n in nodes}
            lines = np.asarray(embedder.embed(list(texts.values())), dtype=np.float32)
            s.execute(insert(TextVectorRow), [{"hash": h, "model": embedder.model_id, "vector": pack(v)}
                                              for h, v in zip(texts, lines, strict=True)])
        campaign.head_depth = depth
