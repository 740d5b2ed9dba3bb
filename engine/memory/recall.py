"""Which memories the next prompt carries: the bank scored against the
reader's line first, then the newest story, part by part.

Read-only: use counts are recorded in the turn's own commit. The query's
parts are the reader's new input (an action or a direction) and the newest
story nodes (the tuning's `recall_nodes`, newest first), taken from the path the turn is
built on, so a retried take is never part of it. Each memory's score is its
best cosine against any part (a story part counts the tuning's `story_weight`
of the reader's line), plus the lexical evidence of the reader's own words in it.

Why parts and words: the query was once the input and the newest story as
one embedded text; a 200-turn campaign's probe "I walk down to the ferry at
Ashwater." was outweighed by the newest filler and recalled five memories
about rivers and bread (the recall evaluation's first run). The knowledge
path learned the same (`engine.search.query.query_parts`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select

from ..budget import tokens
from ..search.recall import choose, rank_units, rarity_share
from ..search.tuning import DEFAULT, Tuning
from ..store.memory_tables import MemoryRow
from ..story.lineage import Path
from ..vectors import QUERIES
from .bank import on_path, recent_story
from .guard import terms
from .lines import LINES, SUMMARIES, line_terms, load_vectors, path_summaries, path_view, rarest, spoken
from .summary import current
from .vectors import CACHE, cache_key, cosines
from .when import resolve

__all__ = ["Recall", "recall", "query_text", "query_parts", "terms", "METHODS", "Judge"]

# How many story nodes and tokens a recall reads, how a story part and the
# reader's words weigh, the redundancy bar and how many a judge re-scores are
# fields of `engine.search.Tuning`, each beside its measurement.
METHODS = ("parts", "single")
# (query parts, memory texts) -> one relevance score per text.
Judge = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


@dataclass
class Recall:
    used: list[dict] = field(default_factory=list)
    report: dict = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return [m["id"] for m in self.used]


def query_text(session, path: Path, pending: str = "", recent: list[str] | None = None,
               tuning: Tuning = DEFAULT) -> str:
    """The newest story nodes, the reader's new input counted among them, as
    one text (newest first): the report's query, and the "single" method's."""
    n = tuning.recall_nodes
    texts = recent_story(session, path, n) if recent is None else recent[-n:]
    texts = (texts + [pending])[-n:] if pending else texts
    return tokens.newest_first(texts, tuning.recall_tokens)


def query_parts(pending: str, story: list[str], tuning: Tuning = DEFAULT) -> list[tuple[str, float]]:
    """(text, weight) parts: the reader's line at weight 1, then the newest
    story texts (oldest first in `story`), newest first, at `story_weight`."""
    parts = [(pending.strip(), 1.0)] if pending and pending.strip() else []
    for text in reversed([t for t in story if t and t.strip()][-tuning.recall_nodes:]):
        parts.append((tokens.last(text.strip(), tuning.recall_tokens), tuning.story_weight))
    return parts


def _catalogue(session, path: Path, model_id: str) -> list[tuple]:
    # Core execution on the session's connection: the ORM result layer cost
    # 3 ms of a 1,000-memory recall for rows that are plain tuples anyway.
    return session.connection().execute(
        select(MemoryRow.id, MemoryRow.pinned, MemoryRow.authority, MemoryRow.text, MemoryRow.source_start,
               MemoryRow.source_end)
        .where(on_path(path), MemoryRow.forgotten.is_(False), MemoryRow.vector_model == model_id)).all()


def _part_vectors(embedder, parts: list[tuple[str, float]], query: str, method: str
                  ) -> list[tuple[np.ndarray, float]]:
    """Each query part's vector, with its weight ("parts"), or the whole
    query as one text at weight 1 ("single", the old way).

    The parts are embedded through the shared query-vector cache
    (`engine.vectors.QUERIES`), so only text no earlier query held is
    embedded: a turn's newest story nodes were the previous turn's parts
    too, and a single-paragraph node is also a part of the knowledge query
    embedded by the same model."""
    if method == "single":
        return [(embedder.embed([query])[0], 1.0)]
    queries = QUERIES.embed(embedder, [text for text, _ in parts])
    return [(q, w) for q, (_, w) in zip(queries, parts, strict=True)]


def recall(session, campaign_id: int, path: Path, embedder, top_k: int, pending: str = "",
           recent: list[str] | None = None, *, method: str = "parts", judge: Judge | None = None,
           tuning: Tuning = DEFAULT, held: Sequence = ()) -> Recall:
    """The recall units for the next prompt, best first: the path's memories,
    its played lines (`lines`) and its earlier summaries, scored together by
    the search layer (`engine.search.recall`) with `tuning`; the report
    records it. More candidates come back than a prompt holds: the builder
    drops those still inside its history window and packs the rest into
    the memories' share. `held` are the unit keys the previous prompt
    showed: each still on the path comes back too, after the ranked ones
    wherever it ranks now, so the builder can show it again unchanged."""
    if embedder is None:
        return Recall(report={"used": [], "error": "No embedder is configured, so no memories are recalled."})
    model = embedder.model_id
    n = tuning.recall_nodes
    story = recent_story(session, path, n) if recent is None else recent[-n:]
    query = query_text(session, path, pending, story, tuning)
    parts = query_parts(pending, story, tuning)
    units = _units(session, campaign_id, path, model, tuning)
    if not units.keys or not query.strip():
        return Recall(report={"used": [], "considered": len(units.keys), "suppressed": [], "error": None})
    try:
        queries = _part_vectors(embedder, parts, query, method)
    except Exception as exc:  # noqa: BLE001 - a failed recall must not fail the turn
        return Recall(report={"used": [], "error": f"The query could not be embedded: {exc}"})
    # The reader's own words, or on a Continue the newest story's.
    said = terms(parts[0][0]) if parts and method == "parts" else frozenset()
    keys, cosines_by_part, scanned = _pool(session, campaign_id, units, queries, said, tuning)
    lexical = rarity_share(said, units.words_for(keys), lambda words: words)
    found = rank_units(keys, cosines_by_part, lexical, tuning)
    ranked = found.order
    meta = units.meta
    judged = _judged(judge, parts, ranked[:tuning.judged], lexical, meta, tuning) if judge is not None else {}
    ranked = sorted(judged, key=judged.get, reverse=True) + ranked[len(judged):]
    floor = tuning.recall_floor
    mine = [k for k in ranked if k[0] == "memory"]
    pinned = {k for k in mine if meta[k].pinned}
    # Memories as before: the pinned and the best of the rest, top_k in all
    # (the floor is the played lines' and summaries', measured on them).
    chosen, suppressed = choose(mine, max(1, top_k), pinned=pinned, group={k: meta[k].authority for k in mine},
                                vector_of=units.vector, bar=tuning.memory_redundant)
    # The played lines and earlier summaries beside them: more candidates
    # than a prompt holds, for the builder to filter by its window.
    others = [k for k in ranked if k[0] != "memory" and found.score[k] >= floor]
    others, repeats = _distinct(others[:2 * tuning.recall_candidates], units, tuning.recall_candidates,
                                tuning.memory_redundant)
    wanted = set(chosen) | set(others)
    place = {k: n for n, k in enumerate(ranked) if k in wanted}
    chosen = sorted(chosen + others, key=place.__getitem__)
    offered = set(chosen)
    for key in (tuple(k) for k in held if isinstance(k, list | tuple) and len(k) == 2):
        if key not in offered and _on_path(units, key):
            chosen.append(key)
            offered.add(key)
    sources = _sources(session, [k[1] for k in chosen if k[0] == "memory"])
    used = [_entry(k, meta[k], found, lexical, k in judged, sources) for k in chosen]
    counts = units.keys.counts()
    return Recall(used, {"used": used, "considered": len(units.keys), "units": counts,
                         # The first ten: a bank of near-alike facts suppressed dozens, 1 KB of every record.
                         "suppressed": [{"id": s["id"][1], "duplicate_of": s["duplicate_of"][1]}
                                        for s in suppressed[:10]],
                         "suppressed_count": len(suppressed),
                         "repeated_lines": repeats, "lines_scanned": scanned,
                         "error": None, "query": query[-200:], "parts": len(parts), "method": method,
                         "floor": floor, "tuning": tuning.record()})


def _pool(session, campaign_id: int, units, queries, said, tuning: Tuning):
    """(keys, each query part's cosines over them with its weight, how many
    played lines were scored by cosine): the units worth ranking.

    Every memory and summary; of the played lines, the newest
    `recall_scan_lines` are scored by cosine, and of those the ones whose
    weighed cosine is among the best `recall_pool` are kept, with every line
    (of any age, the rarest words' first, at most `recall_pool` older than
    the scanned ones) holding a word of the reader's line that is not common
    among the lines. Exact for the order at its top among the lines scanned:
    a scanned line outside both can score no more than its cosine, under
    every pooled one. (The rarity of a word is then counted among the pooled
    units, which hold every scanned unit holding it.) Scoring all 4,000
    lines of a 2,000-turn story in Python was most of a recall."""
    lo, hi = units.line_span
    total = len(units.keys)
    start = max(lo, hi - tuning.recall_scan_lines)
    # Lines holding a word of the line that is not common among them (the
    # search tuning's common_share, as for passages): "ask" in every
    # reader's line would pool them all.
    worded = np.empty(0, dtype=np.int64)
    older = np.empty(0, dtype=np.int64)
    if said and hi > lo:
        rows = units.held["line"].rows
        found, old = [], []
        for ids in rarest(session, campaign_id, said, tuning.common_share * (hi - lo)):
            at = [lo + rows[i] for i in ids if i in rows]
            found.extend(p for p in at if p >= start)
            if len(old) < tuning.recall_pool:
                old.extend(sorted(p for p in at if p < start)[-(tuning.recall_pool - len(old)):])
        worded = np.unique(np.asarray(found, dtype=np.int64))
        older = np.unique(np.asarray(old, dtype=np.int64))
    # Positions (in `units.keys`) scored by cosine, and their cosines per part.
    positions = np.concatenate([np.arange(0, lo), np.arange(start, hi), np.arange(hi, total), older]).astype(np.int64)
    parts = []
    for q, w in queries:
        pieces = [cosines(held.vectors, q) for kind, held in units.matrices() if kind != "line"]
        if hi > lo:
            line = units.held["line"].vectors
            pieces.insert(1 if lo else 0, cosines(line[start - lo:], q))
            pieces.append(cosines(line[older - lo], q) if len(older) else np.empty(0, dtype=np.float32))
        parts.append((np.concatenate(pieces) if pieces else np.empty(0, dtype=np.float32), w))
    window = hi - start
    if window > tuning.recall_pool:
        best = np.max([c[lo:lo + window] * w for c, w in parts], axis=0)
        top = start + np.argpartition(-best, tuning.recall_pool)[:tuning.recall_pool]
        keep = np.unique(np.concatenate([np.arange(0, lo), top, worded, np.arange(hi, total), older]))
        order = np.argsort(positions, kind="stable")
        chosen = order[np.searchsorted(positions[order], keep)]
    else:
        chosen = np.argsort(positions, kind="stable")
    return ([units.keys[int(p)] for p in positions[chosen]], [(c[chosen], w) for c, w in parts],
            window + len(older))


def _distinct(order: list, units, k: int, bar: float) -> tuple[list, int]:
    """The best `k` of `order` with no two of one kind at cosine `bar` or
    more (a line said twice, "How has your week been?"): the greedy choice
    of `search.recall.choose`, over one product of the candidates' vectors
    (a dot product per pair over 2,000 lines was most of a 1,000-turn
    recall)."""
    if not order:
        return [], 0
    width = next(iter(units.held.values())).vectors.shape[1]
    rows = np.empty((len(order), width), np.float32)
    for kind in {key[0] for key in order}:
        at = [n for n, key in enumerate(order) if key[0] == kind]
        held = units.held[kind]
        rows[at] = held.vectors[[held.rows[order[n][1]] for n in at]]
    gram = np.einsum("ij,kj->ik", rows, rows)  # on this thread (see engine.vectors.cosines)
    kinds = np.array([key[0] == "line" for key in order])
    clash = (gram >= bar) & (kinds[:, None] == kinds[None, :])
    kept: list[int] = []
    repeats = 0
    for i in range(len(order)):
        if len(kept) >= k:
            break
        if kept and clash[i, kept].any():
            repeats += 1
            continue
        kept.append(i)
    return [order[i] for i in kept], repeats


def _on_path(units, key) -> bool:
    """Whether a unit key names a unit of this recall: a memory not forgotten
    and embedded by this model, a played line or an earlier summary of the path."""
    kind, i = key
    if kind == "memory":
        return key in units.meta
    if kind == "line":
        return i in units.lines and "line" in units.held and i in units.held["line"].rows
    return kind == "summary" and i in units.meta.summaries


def _entry(key, meta, found, lexical, judged: bool, sources: dict) -> dict:
    """One recalled unit as the builder and the turn's report see it. A
    memory keeps the fields it always had; a line or summary only what says
    what it is and where it stands (a 300-turn record kept under 8 KB)."""
    kind, i = key
    # A held unit outside the scored pool has no score: 0.
    out = {"id": i, "unit": kind, "text": meta.shown, "score": round(found.score.get(key, 0.0), 4),
           "similarity": round(found.cosine.get(key, 0.0), 4), "lexical": round(lexical.get(key, 0.0), 4),
           "start": meta.start, "end": meta.end}
    if kind == "memory":
        out.update(judged=judged, pinned=meta.pinned, authority=meta.authority, source=sources.get(i))
    elif meta.when:
        out["when"] = meta.when
    return out


@dataclass(frozen=True)
class _Meta:
    shown: str  # the text a prompt carries (a line with the time in force, relative days written out)
    pinned: bool = False
    authority: str = "accepted_story"
    start: int | None = None  # the depths of the story it stands for
    end: int | None = None
    when: str = ""


class _Shown(dict):
    """{unit key: _Meta}, a line's made when first asked for: a turn shows a
    few of thousands, and making each one's text (its time, relative days
    written out) was most of a 1,000-turn recall."""

    def __init__(self, lines: dict):
        super().__init__()
        self.lines = lines
        self.summaries: dict = {}  # summary id -> lines.Summary
        self.view = None  # the path's lines.PathLines, for the time in force at a summary's end

    def __missing__(self, key):
        if key[0] == "summary":
            summary = self.summaries[key[1]]
            stamp = self.view.stamp_at(summary.end) if summary.end is not None and self.view is not None else None
            label = stamp.label if stamp is not None else ""
            made = self[key] = _Meta(f"[story to {label}] {summary.text}" if label
                                     else f"[earlier summary] {summary.text}",
                                     start=summary.start, end=summary.end, when=label)
            return made
        line = self.lines[key[1]]
        label = line.stamp.label if line.stamp is not None else ""
        text = resolve(spoken(line.kind, line.text), line.stamp)
        made = self[key] = _Meta(f"[{label}] {text}" if label else text, start=line.depth, end=line.depth,
                                 when=label)
        return made


class _Keys(Sequence):
    """The units' keys ("memory" | "line" | "summary", id) in that order,
    the lines' made only when asked for: a 10,000-turn story has 20,000
    lines, and making a key for each one every turn (and counting them) was
    7 ms of a turn, for the few hundred the pool keeps."""

    def __init__(self, memories: list, lines: Sequence[int], summaries: list):
        self.memories, self.lines, self.summaries = memories, lines, summaries

    def __len__(self) -> int:
        return len(self.memories) + len(self.lines) + len(self.summaries)

    def __getitem__(self, i: int):
        if i < 0:
            i += len(self)
        if i < len(self.memories):
            return self.memories[i]
        if i - len(self.memories) < len(self.lines):
            return ("line", self.lines[i - len(self.memories)])
        return self.summaries[i - len(self.memories) - len(self.lines)]

    def __iter__(self):
        yield from self.memories
        yield from (("line", i) for i in self.lines)
        yield from self.summaries

    def counts(self) -> dict[str, int]:
        return {"memory": len(self.memories), "line": len(self.lines), "summary": len(self.summaries)}


@dataclass
class _Units:
    """Every recall unit on the path: keys ("memory" | "line" | "summary", id),
    their words, how each is shown, and one vector matrix per kind."""

    keys: _Keys = field(default_factory=lambda: _Keys([], (), []))
    words: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)  # node id -> lines.Line (and maybe lines past the path's tip)
    meta: dict = field(default_factory=dict)
    held: dict = field(default_factory=dict)  # kind -> Held

    def __post_init__(self):
        self.meta = _Shown(self.lines)

    line_span: tuple = (0, 0)  # where the lines sit in `keys`
    line_words: object = None  # node ids -> {node id: words}, from the line index

    def words_for(self, keys) -> dict:
        """{unit key: its meaningful words}, a line's from the line index."""
        lines = [k[1] for k in keys if k[0] == "line" and k not in self.words]
        if lines:
            found = self.line_words(lines)
            self.words.update((("line", i), found[i]) for i in lines)
        return {k: self.words[k] for k in keys}

    def vector(self, key) -> np.ndarray:
        return self.held[key[0]][key[1]]

    def matrices(self):
        return [(kind, self.held[kind]) for kind in ("memory", "line", "summary") if len(self.held.get(kind, ()))]


def _units(session, campaign_id: int, path: Path, model: str, tuning: Tuning) -> _Units:
    view = path_view(session, campaign_id, path) if tuning.recall_lines > 0 else None
    out = _Units(lines=view.by_id if view is not None else {})
    memories = _catalogue(session, path, model)
    keys: list = []

    def load_memories(missing):
        return dict(session.execute(select(MemoryRow.id, MemoryRow.vector).where(MemoryRow.id.in_(missing))).all())

    if memories:
        # Unit vectors as one matrix, row for row with `held.ids` (the ids that
        # have one); the same matrix every turn the bank is unchanged. Keyed by the
        # open database behind `session`, not by its path, which a file made again
        # at that path would share.
        held = CACHE.get(cache_key(session, campaign_id, model), [m[0] for m in memories], load_memories)
        out.held["memory"] = held
        info = {m[0]: m for m in memories}
        for i in held.ids:
            _, pinned, authority, text, start, end = info[i]
            key = ("memory", i)
            keys.append(key)
            out.words[key] = terms(text)
            out.meta[key] = _Meta(text, bool(pinned), authority, start, end)
    if view is None:
        out.keys = _Keys(keys, (), [])
        return out
    by_id = view.by_id
    # The lines' vectors grow at the tail with the story (`engine.vectors.extended`).
    held = CACHE.grown(CACHE.key(session, campaign_id, LINES, model), view.ids, view.id_count,
                       lambda missing: load_vectors(session, model, {i: by_id[i].hash for i in missing}))
    out.held["line"] = held
    out.line_words = lambda ids: line_terms(session, campaign_id, [by_id[i] for i in ids])
    out.line_span = (len(keys), len(keys) + len(held.ids))
    current_summary = current(session, path)
    summaries = {u.id: u for u in path_summaries(session, campaign_id, path)
                 if current_summary is None or u.id != current_summary.id}
    tail: list = []
    if summaries:
        held = CACHE.get(CACHE.key(session, campaign_id, SUMMARIES, model), list(summaries),
                         lambda missing: load_vectors(session, model, {i: summaries[i].hash for i in missing}))
        out.held["summary"] = held
        tail = [summaries[i].key for i in held.ids]
        out.words.update((u.key, u.words) for u in summaries.values())
        out.meta.summaries, out.meta.view = summaries, view
    out.keys = _Keys(keys, out.held["line"].ids, tail)
    return out


def _judged(judge: Judge, parts, best: list[int], lexical: dict[int, float], meta, tuning: Tuning
            ) -> dict[int, float]:
    """{memory: the judge's relevance against the query's parts plus the same
    lexical evidence} for the first score's best (`best`); they are ordered
    by it among themselves, above every memory the judge did not see. Empty
    when the judge fails: the first order stands, as in a turn without one."""
    if not best:
        return {}
    try:
        relevance = judge([text for text, _ in parts], [meta[i].shown for i in best])
    except Exception:  # noqa: BLE001 - a judge that fails must not fail the recall
        return {}
    return {i: float(r) + tuning.lexical_weight * lexical.get(i, 0.0) for i, r in zip(best, relevance, strict=True)}


def _sources(session, chosen: list[int]) -> dict[int, dict]:
    """{memory id: where it came from} for the chosen memories."""
    if not chosen:
        return {}
    return {r[0]: {"branch_id": r[1], "depth": r[2], "source_start": r[3], "source_end": r[4]}
            for r in session.execute(select(MemoryRow.id, MemoryRow.branch_id, MemoryRow.depth,
                                            MemoryRow.source_start, MemoryRow.source_end)
                                     .where(MemoryRow.id.in_(chosen))).all()}
