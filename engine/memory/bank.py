"""The memory bank: settled blocks of story become short memories.

Where the bank stands is read from the story itself: the memory anchor is the
furthest `source_end` among the memories on the path being played. So a
memory is "written" only once its row exists (the cursor moves only on
success), and after an Undo or a divergence the anchor rewinds by itself,
because the abandoned line's memories are no longer on the path.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update

from ..providers import Prompt, Text
from ..store import CampaignRow, NodeRow
from ..store.memory_tables import MemoryRow
from ..store.models import utcnow
from ..store.narrative_tables import StateEventRow
from ..story import StoryTree
from ..story.lineage import Path
from .authority import classify_authority
from .facts import FACTS_PER_BLOCK, FACTS_SYSTEM, Fact, Said, check_fact, facts_of, facts_request, said_by
from .guard import READER_LINES, REQUIRED_ITEMS, check, extractive, salient, state_facts, terms
from .lines import path_lines
from .prompts import MEMORY_MAX_WORDS, cast_brief, clip_words
from .vectors import CACHE, KIND, pack
from .when import resolve

__all__ = [
    "MEMORY_INTERVAL", "MEMORY_MAX_TOKENS", "MEMORY_START", "SETTLE_SLACK", "MAX_MEMORIES_PER_RUN", "MAX_EMBED_BATCH",
    "on_path", "story_after", "recent_story", "memory_anchor", "due_block", "write_due_memories", "embed_pending",
    "evict", "record_use", "set_vector", "generate", "guarded", "Block", "block_facts", "block_memories",
]

MEMORY_INTERVAL = 6        # story nodes per memory
MEMORY_START = 12          # no memories before the story has this many story nodes
# One node of slack: a retry or a take switch only touches the newest node, so
# a block ending on the tip is the one memory a reader can discard; waiting one
# node costs nothing (the block is still in the history window).
SETTLE_SLACK = 1
MAX_MEMORIES_PER_RUN = 5   # caps catch-up after an import
MAX_EMBED_BATCH = 32
# The reply is clipped to MEMORY_MAX_WORDS (50) words anyway; SmolLM2 writes
# about 1.3 tokens a word, so 96 tokens hold the 50 words with room to end the
# sentence. 160 let the 135M model write 100+ words that were then thrown
# away, at ~0.1 s a token on a busy 2-core machine.
MEMORY_MAX_TOKENS = 96
# How much recent story sets a word's rarity for an extractive memory: ten
# blocks, enough that filler repeated every few turns counts as common.
RARITY_NODES = 60
STORY_KINDS = ("player", "direction", "narrator")


def on_path(path: Path, after: int | None = None):
    return path.clause(MemoryRow.branch_id, MemoryRow.depth, after=after)


def story_after(session, path: Path, after: int, limit: int | None = None) -> list[NodeRow]:
    query = (select(NodeRow).where(path.clause(after=after), NodeRow.kind.in_(STORY_KINDS))
             .order_by(NodeRow.depth))
    return list(session.scalars(query.limit(limit) if limit else query))


def recent_story(session, path: Path, n: int) -> list[str]:
    """The texts of the newest `n` story nodes on `path`, oldest first.

    Read newest-first with a limit, as text only: loading the whole path as
    ORM rows to keep four cost 27 ms at 1,000 turns against 0.2 ms for this."""
    if path.depth < 0 or n <= 0:
        return []
    rows = session.execute(select(NodeRow.text).where(path.clause(), NodeRow.kind.in_(STORY_KINDS))
                           .order_by(NodeRow.depth.desc()).limit(n)).scalars().all()
    return list(reversed(rows))


def memory_anchor(session, path: Path) -> int:
    """The end of the deepest block written on the path: every memory the
    engine writes is anchored at the node its block ends on (its facts name
    their own lines in source_start/source_end), so this is the largest
    depth, read from the coordinate index instead of by visiting every
    memory on the path (14 ms per turn at 10,000 turns)."""
    anchor = session.scalar(select(MemoryRow.depth).where(on_path(path))
                            .order_by(MemoryRow.depth.desc()).limit(1))
    return -1 if anchor is None else anchor


def _story_count(session, path: Path, cap: int) -> int:
    """How many story nodes the path has, counting no further than `cap`: a
    whole-path count grew with the campaign and ran after every turn."""
    few = select(NodeRow.id).where(path.clause(), NodeRow.kind.in_(STORY_KINDS)).limit(cap).subquery()
    return session.scalar(select(func.count()).select_from(few))


@dataclass(frozen=True)
class Block:
    nodes: list[tuple[int, int, str]]  # (branch id, depth, text)
    brief: str
    protagonist: str = ""
    corpus: tuple[str, ...] = ()  # the recent story, for the rarity of a word (guard.extractive)
    facts: tuple[str, ...] = ()  # what the narrator's state events recorded in these turns (guard.state_facts)
    said: tuple[Said, ...] = ()  # the block's lines, each with its speaker and the time in force (facts.said_by)

    @property
    def start(self) -> int:
        return self.nodes[0][1]

    @property
    def end(self) -> tuple[int, int]:
        return self.nodes[-1][0], self.nodes[-1][1]


def due_block(session, campaign: CampaignRow) -> Block | None:
    """The next settled block of MEMORY_INTERVAL story nodes, or None."""
    tree = StoryTree(session, campaign)
    path = tree.path()
    anchor = memory_anchor(session, path)
    after = story_after(session, path, anchor, MEMORY_INTERVAL + SETTLE_SLACK)
    if len(after) < MEMORY_INTERVAL + SETTLE_SLACK or _story_count(session, path, MEMORY_START) < MEMORY_START:
        return None
    block = after[:MEMORY_INTERVAL]
    stamps = {line.depth: line.stamp for line in path_lines(session, campaign.id, path, block[-1].depth + 1,
                                                            since=block[0].depth)}
    protagonist = campaign.protagonist or ""
    said = tuple(said_by(n.depth, n.kind, n.text, protagonist, stamps.get(n.depth)) for n in block
                 if n.kind != "direction")
    return Block([(n.branch_id, n.depth, n.text) for n in block], cast_brief(campaign.protagonist, campaign.state),
                 protagonist, tuple(recent_story(session, path, RARITY_NODES)),
                 tuple(block_facts(session, [n.id for n in block])), said)


def block_facts(session, node_ids: list[int]) -> list[str]:
    """The facts the accepted state events of these story nodes recorded, in
    the order they were written: a memory of the block must keep them."""
    events = session.scalars(select(StateEventRow.event).where(StateEventRow.node_id.in_(node_ids),
                                                               StateEventRow.accepted.is_(True))
                             .order_by(StateEventRow.id)).all()
    return state_facts(events)


def generate(narrator, system: str, request: str, max_tokens: int, task: str) -> str:
    """One derived-work call; the text of the reply, stripped."""
    chunks = narrator.execute(Prompt(system, request, max_tokens=max_tokens, temperature=0.3, task=task))
    return "".join(c.text for c in chunks if isinstance(c, Text)).strip()


def guarded(raw: str, block: Block, *, guard: bool = True, log: list | None = None,
            reader_lines: int = READER_LINES) -> str:
    """The memory that is kept for `block`: the model's, when the guard lets it
    stand, else the block's own most informative sentences (`guard.extractive`,
    keeping `reader_lines` of the reader's own lines first)."""
    texts = [t for _, _, t in block.nodes]
    verdict = check(raw, texts, block.protagonist, block.facts)
    text = raw if verdict.ok or not guard else clip_words(
        extractive(texts, MEMORY_MAX_WORDS, block.protagonist, block.corpus, block.facts, reader_lines),
        MEMORY_MAX_WORDS)
    if log is not None:
        log.append({"start": block.start, "end": block.end[1], "raw": raw, "kept": text, "accepted": verdict.ok,
                    "reason": verdict.reason, "required": list(verdict.required), "kept_items": list(verdict.kept)})
    return text


def block_memories(raw: str, block: Block, *, guard: bool = True, log: list | None = None) -> list[Fact]:
    """The memories kept for `block`: the facts the narrator's state events
    recorded, the model's facts that stand (`facts.check_fact`), then facts
    made from the block's own lines (`facts.facts_of`), FACTS_PER_BLOCK in
    all beside the recorded ones. `guard=False` keeps the model's reply
    whole, as one memory of the block (the evaluation's "before")."""
    texts = [t for _, _, t in block.nodes]
    end = block.end[1]
    if not guard:
        kept = [Fact(raw, block.start, end, "", True)] if raw.strip() else []
    else:
        kept = [Fact(_closed_fact(f), block.start, end, "") for f in block.facts if f.strip()]
        written = [f for f in _fact_lines(raw) if check_fact(f, texts, block.protagonist)]
        for fact in written[:FACTS_PER_BLOCK]:
            line = _source_line(fact, block.said)
            stamp = line.stamp if line is not None else None
            at = line.depth if line is not None else end
            kept.append(Fact(_closed_fact(resolve(fact, stamp)), at, at, "", True))
        room = FACTS_PER_BLOCK - len(written[:FACTS_PER_BLOCK])
        seen = [terms(f.text) for f in kept]
        for fact in facts_of(block.said, block.protagonist, block.corpus, FACTS_PER_BLOCK):
            if room <= 0:
                break
            words = terms(fact.text)
            if any(len(words & other) >= 0.6 * max(1, min(len(words), len(other))) for other in seen):
                continue
            kept.append(fact)
            seen.append(words)
            room -= 1
    if log is not None:
        by_model = sum(f.by_model for f in kept)
        log.append({"start": block.start, "end": end, "raw": raw, "kept": " ".join(f.text for f in kept),
                    "required": salient([*texts, *block.facts])[:REQUIRED_ITEMS],
                    "facts": [f.text for f in kept], "sources": [f.source for f in kept], "by_model": by_model,
                    "accepted": by_model > 0, "lines": texts,
                    "reason": "" if by_model else "no fact of the model's stood: facts made from the lines"})
    return kept


def _fact_lines(raw: str) -> list[str]:
    """The model's reply as one fact per line, bullets and numbering dropped."""
    out = []
    for line in (raw or "").splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if line:
            out.append(line)
    return out


def _closed_fact(text: str) -> str:
    text = " ".join(text.split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "…", ")")) else text + "."


def _source_line(fact: str, said: Sequence[Said]) -> Said | None:
    """The line of the block a fact of the model's shares most words with."""
    words = terms(fact)
    best = max(said, key=lambda s: len(words & terms(s.words)), default=None)
    return best if best is not None and words & terms(best.words) else None


def write_due_memories(db, campaign_id: int, narrator, model_name: str = "", *, guard: bool = True,
                       log: list | None = None) -> int:
    """Write the memories of up to MAX_MEMORIES_PER_RUN blocks; each read,
    call and write is its own step, so no transaction spans a model call.
    `guard=False` keeps the model's text whatever it holds (the evaluation's
    "before"); `log` collects what each block kept. Returns the blocks written."""
    written = 0
    for _ in range(MAX_MEMORIES_PER_RUN):
        with db.reading() as s:
            block = due_block(s, s.get(CampaignRow, campaign_id))
        if block is None:
            break
        request = facts_request(block.brief, [t for _, _, t in block.nodes])
        raw = generate(narrator, FACTS_SYSTEM, request, max_tokens=MEMORY_MAX_TOKENS, task="memory")
        kept = block_memories(clip_words(raw, MEMORY_MAX_WORDS), block, guard=guard, log=log)
        if not kept:  # a block with nothing to remember still moves the anchor
            kept = [Fact(clip_words(extractive([t for _, _, t in block.nodes], MEMORY_MAX_WORDS, block.protagonist,
                                               block.corpus), MEMORY_MAX_WORDS), block.start, block.end[1], "")]
        branch, depth = block.end
        with db.writing() as s:
            if s.scalar(select(MemoryRow.id).where(MemoryRow.branch_id == branch, MemoryRow.depth == depth)):
                break  # another runner wrote it meanwhile
            for fact in kept:
                if fact.text.strip():
                    s.add(MemoryRow(campaign_id=campaign_id, text=fact.text, branch_id=branch, depth=depth,
                                    source_start=fact.start, source_end=fact.end,
                                    authority=classify_authority(fact.text)))
        written += 1
    return written


def set_vector(session, memory: MemoryRow, vector, model_id: str, database: str) -> None:
    """The only writer of a memory's vector; it drops the cached copy (in
    every open copy of the file at `database`), now and again once the write
    commits: a recall in between reads the old vector from its snapshot, and
    would otherwise keep it."""
    from sqlalchemy import event  # here, not at the top: this function alone uses it

    memory.vector = pack(vector) if vector is not None else None
    memory.vector_model = model_id if vector is not None else ""
    where, row_id = (database, memory.campaign_id, KIND), memory.id
    CACHE.drop(where, row_id)
    event.listen(session, "after_commit", lambda _session: CACHE.drop(where, row_id), once=True)


def embed_pending(db, campaign_id: int, embedder) -> int:
    """Embed up to MAX_EMBED_BATCH memories without a vector from this model
    (a model switch re-embeds rather than mixing models)."""
    with db.reading() as s:
        pending = s.execute(
            select(MemoryRow.id, MemoryRow.text)
            .where(MemoryRow.campaign_id == campaign_id, MemoryRow.forgotten.is_(False),
                   MemoryRow.vector_model != embedder.model_id)
            .order_by(MemoryRow.id).limit(MAX_EMBED_BATCH)).all()
    if not pending:
        return 0
    vectors = embedder.embed([text for _, text in pending])
    with db.writing() as s:
        for (memory_id, _), vector in zip(pending, vectors, strict=True):
            row = s.get(MemoryRow, memory_id)
            if row is not None:
                set_vector(s, row, vector, embedder.model_id, str(db.path))
    return len(pending)


def evict(db, campaign_id: int, capacity: int) -> int:
    """Forget the least recently used unpinned memories over capacity.

    Recency first, use count only to break ties: ordering by count first froze
    the bank (a new memory has count 0, so it was evicted in the run that
    wrote it, every time). Forgotten memories are kept for display."""
    with db.reading() as s:  # most turns evict nothing: ask before taking the write lock
        active = s.scalar(select(func.count()).select_from(MemoryRow).where(
            MemoryRow.campaign_id == campaign_id, MemoryRow.forgotten.is_(False)))
    if active <= max(1, capacity):
        return 0
    with db.writing() as s:
        active = s.scalar(select(func.count()).select_from(MemoryRow).where(
            MemoryRow.campaign_id == campaign_id, MemoryRow.forgotten.is_(False)))
        overflow = active - max(1, capacity)
        if overflow <= 0:
            return 0
        ids = s.scalars(
            select(MemoryRow.id)
            .where(MemoryRow.campaign_id == campaign_id, MemoryRow.forgotten.is_(False), MemoryRow.pinned.is_(False))
            .order_by(func.coalesce(MemoryRow.last_used_at, MemoryRow.created_at), MemoryRow.use_count, MemoryRow.id)
            .limit(overflow)).all()
        if ids:
            s.execute(update(MemoryRow).where(MemoryRow.id.in_(ids)).values(forgotten=True))
        return len(ids)


def record_use(session, used_ids: list[int]) -> None:
    """Counted in the turn's own commit: writing during retrieval held SQLite's
    write lock for the whole model call."""
    if used_ids:
        session.execute(update(MemoryRow).where(MemoryRow.id.in_(used_ids))
                        .values(use_count=MemoryRow.use_count + 1, last_used_at=utcnow())
                        .execution_options(synchronize_session=False))

