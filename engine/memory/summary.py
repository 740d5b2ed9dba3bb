"""The running story summary, anchored to the node it covers.

The summary valid at the head is the newest one whose coordinate is on the
path being played. It is rewritten from that one, never from whatever was
written last: seeding from a global column once carried an abandoned line's
prose into the new line's summary. Summaries are never deleted; an Undo or a
divergence only makes them ineligible.
"""
from __future__ import annotations

from sqlalchemy import select

from ..budget import tokens
from ..store import CampaignRow
from ..store.memory_tables import MemoryRow, SummaryRow
from ..story import StoryTree
from ..story.lineage import Path
from .bank import generate, on_path, story_after
from .guard import check, extractive
from .prompts import EXCERPT_TOKENS, SUMMARY_MAX_WORDS, SUMMARY_SYSTEM, cast_brief, clip_words, summary_request

__all__ = ["SUMMARY_INTERVAL", "SUMMARY_MAX_TOKENS", "current", "provenance", "summarise_if_due", "record", "guarded"]

SUMMARY_INTERVAL = 15  # story nodes not yet covered before the summary is rewritten
# The reply is clipped to SUMMARY_MAX_WORDS (250) words; at SmolLM2's ~1.3
# tokens a word that is ~330 tokens. With 600 the 135M model wrote ~500 words
# (45 s on a busy 2-core machine, measured) of which half was thrown away.
SUMMARY_MAX_TOKENS = 360


def current(session, path: Path) -> SummaryRow | None:
    return session.scalar(
        select(SummaryRow).where(path.clause(SummaryRow.branch_id, SummaryRow.depth))
        .order_by(SummaryRow.depth.desc(), SummaryRow.id.desc()).limit(1))


def provenance(row: SummaryRow | None) -> dict:
    if row is None:
        return {}
    return {"id": row.id, "depth": row.depth, "source_start": row.source_start, "source_end": row.source_end,
            "trigger": row.trigger, "preview": row.text[:160]}


def record(session, campaign: CampaignRow, text: str, *, source_start: int | None, trigger: str,
           model_name: str = "", at: tuple[int, int] | None = None) -> SummaryRow:
    """A summary at `at` (branch, depth), default the head; typed summaries use trigger 'manual'."""
    tree = StoryTree(session, campaign)
    if at is None:
        node = tree.head_node()
        at = (node.branch_id, node.depth) if node else (campaign.head_branch_id, campaign.head_depth)
    row = SummaryRow(campaign_id=campaign.id, text=text.strip(), branch_id=at[0], depth=at[1],
                     source_start=source_start, source_end=at[1], trigger=trigger, model_name=model_name)
    session.add(row)
    return row


def guarded(raw: str, current_text: str, events: list[str], protagonist: str, *, guard: bool = True,
            log: list | None = None) -> str:
    """The summary that is kept: the model's, when it keeps the facts of what
    it summarises (`guard.check`), else the most informative sentences of the
    current summary and the new events, so a weak model's summary about
    "an old dog barking" cannot replace what the story established."""
    sources = [t for t in (current_text, *events) if t]
    verdict = check(raw, sources, protagonist)
    text = raw if verdict.ok or not guard else clip_words(extractive(sources, SUMMARY_MAX_WORDS, protagonist),
                                                          SUMMARY_MAX_WORDS)
    if log is not None:
        log.append({"raw": raw, "kept": text, "accepted": verdict.ok, "reason": verdict.reason})
    return text


def summarise_if_due(db, campaign_id: int, narrator, model_name: str = "", *, guard: bool = True,
                     log: list | None = None) -> bool:
    with db.reading() as s:
        campaign = s.get(CampaignRow, campaign_id)
        tree = StoryTree(s, campaign)
        path = tree.path()
        base = current(s, path)
        anchor = base.source_end if base is not None and base.source_end is not None else -1
        uncovered = story_after(s, path, anchor)
        if len(uncovered) < SUMMARY_INTERVAL:
            return False
        head = tree.head_node()
        caught_up = (head.branch_id, head.depth)  # read before the call: a turn landing meanwhile is not "read"
        memories = s.scalars(select(MemoryRow.text).where(on_path(path, after=anchor))
                             .order_by(MemoryRow.depth)).all()
        sources = list(memories) or [tokens.last("\n\n".join(n.text for n in uncovered), EXCERPT_TOKENS)]
        events = "\n".join(f"- {m}" for m in memories) or sources[0]
        request = summary_request(cast_brief(campaign.protagonist, campaign.state), base.text if base else "", events)
        protagonist, base_text = campaign.protagonist or "", base.text if base else ""
    raw = clip_words(generate(narrator, SUMMARY_SYSTEM, request, max_tokens=SUMMARY_MAX_TOKENS, task="summary"), SUMMARY_MAX_WORDS)
    text = guarded(raw, base_text, sources, protagonist, guard=guard, log=log)
    if not text:
        return False
    with db.writing() as s:
        record(s, s.get(CampaignRow, campaign_id), text, source_start=anchor + 1, trigger="interval",
               model_name=model_name, at=caught_up)
    return True
