"""The memory bank: settled blocks of story become short memories.

Where the bank stands is read from the story itself: the memory anchor is the
furthest `source_end` among the memories on the path being played. So a
memory is "written" only once its row exists (the cursor moves only on
success), and after an Undo or a divergence the anchor rewinds by itself,
because the abandoned line's memories are no longer on the path.
"""
from __future__ import annotations

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
from .guard import READER_LINES, check, extractive, state_facts
from .prompts import MEMORY_MAX_WORDS, MEMORY_SYSTEM, cast_brief, clip_words, memory_request
from .vectors import CACHE, KIND, pack

__all__ = [
    "MEMORY_INTERVAL", "MEMORY_MAX_TOKENS", "MEMORY_START", "SETTLE_SLACK", "MAX_MEMORIES_PER_RUN", "MAX_EMBED_BATCH",
    "on_path", "story_after", "recent_story", "memory_anchor", "due_block", "write_due_memories", "embed_pending",
    "evict", "record_use", "set_vector", "generate", "guarded", "Block", "block_facts",
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
    """The end of the deepest memory on the path. Every memory the engine
    writes ends where it is anchored (source_end == depth), so this is the
    largest source_end, read from the coordinate index instead of by visiting
    every memory on the path (14 ms per turn at 10,000 turns)."""
    anchor = session.scalar(select(MemoryRow.source_end).where(on_path(path))
                            .order_by(MemoryRow.depth.desc(), MemoryRow.source_end.desc()).limit(1))
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
    return Block([(n.branch_id, n.depth, n.text) for n in block], cast_brief(campaign.protagonist, campaign.state),
                 campaign.protagonist or "", tuple(recent_story(session, path, RARITY_NODES)),
                 tuple(block_facts(session, [n.id for n in block])))


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


def write_due_memories(db, campaign_id: int, narrator, model_name: str = "", *, guard: bool = True,
                       log: list | None = None) -> int:
    """Write up to MAX_MEMORIES_PER_RUN memories; each read, call and write is its own step,
    so no transaction spans a model call. `guard=False` keeps the model's text
    whatever it holds (the evaluation's "before"); `log` collects each verdict."""
    written = 0
    for _ in range(MAX_MEMORIES_PER_RUN):
        with db.reading() as s:
            block = due_block(s, s.get(CampaignRow, campaign_id))
        if block is None:
            break
        raw = clip_words(generate(narrator, MEMORY_SYSTEM, memory_request(block.brief, [t for _, _, t in block.nodes]),
                                  max_tokens=MEMORY_MAX_TOKENS, task="memory"), MEMORY_MAX_WORDS)
        text = guarded(raw, block, guard=guard, log=log)
        if not text:
            break
        branch, depth = block.end
        with db.writing() as s:
            if s.scalar(select(MemoryRow.id).where(MemoryRow.branch_id == branch, MemoryRow.depth == depth,
                                                   MemoryRow.source_start == block.start)):
                break  # another runner wrote it meanwhile
            s.add(MemoryRow(campaign_id=campaign_id, text=text, branch_id=branch, depth=depth,
                            source_start=block.start, source_end=depth, authority=classify_authority(text)))
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

