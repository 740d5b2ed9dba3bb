"""Every played line as a recall unit: the reader's inputs, the narrator's
replies and the opening, read from the story nodes on the path being played.

Why lines and not only written memories: on the issue's long-conversation
benchmark the project's memories held the answer to 15 % of questions whose
evidence had left the history window, and three raw lines picked by BM25
held it for 20 %; SillyTavern vectorises every chat message for the same
reason. A line is a node, so lineage is the story's own: Undo, a retry and
a fork change which nodes are on the path, and nothing is copied that could
disagree with it. Vectors live in `text_vectors`, keyed by the text's
content hash and the model, so an edited line is embedded anew and a
revision brought back finds its old vector.

Reading the whole path every turn grew with the story, so each campaign's
lines are kept in an index read incrementally: nodes newer than the last
one seen, and nodes revised since the last revision seen (the only change a
node's text can have). The time in force at each line (`when.advance`) is
worked out along the path once per node: a node's ancestors never change.

Nothing a turn does here walks the whole story: the last path read is kept
and grown at its tip (`PathLines`), and the lines still waiting for a vector
are kept per model (`embed_texts` looks at those, not at every line). At
10,000 turns, under cProfile, looking through every line for the ones
without a vector took 21 ms of a 139 ms turn (77 ms unprofiled), and making
a key, a hash entry and a count for every line another 11.
"""
from __future__ import annotations

import bisect
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, select

from ..store import CampaignRow, NodeRevisionRow, NodeRow
from ..store.memory_tables import SummaryRow, TextVectorRow
from ..story import StoryTree
from ..story.lineage import Path
from ..vectors import CACHE, pack
from .guard import terms
from .when import Stamp, advance

__all__ = ["LINE_KINDS", "LINES", "SUMMARIES", "MAX_TEXT_BATCH", "Line", "PathLines", "text_hash", "spoken",
           "path_lines", "path_view", "path_summaries", "Summary", "embed_texts", "embed_story", "load_vectors", "forget", "line_terms", "holding",
           "rarest"]

# Directions are instructions to the narrator, not story; they are not recalled.
LINE_KINDS = ("start", "player", "narrator")
LINES = "lines"          # the vector cache's kind for line vectors (keyed by node id)
SUMMARIES = "summaries"  # ... and for summary vectors (keyed by summary id)
# Texts embedded per derived run: MiniLM embeds 256 short texts in ~0.6 s on
# the 2-core machine, so a run stays under a second and an imported story of
# 2,000 turns catches up in 16 turns (lines left unembedded are simply not
# recalled until they are).
MAX_TEXT_BATCH = 256
# Campaigns whose line index is kept in memory (a few per notebook).
INDEXED_CAMPAIGNS = 8


def text_hash(text: str) -> str:
    return hashlib.blake2b((text or "").encode("utf-8"), digest_size=16).hexdigest()


def spoken(kind: str, text: str) -> str:
    """A line as it is recalled: the reader's marker dropped ('> I open the
    door.' reads 'I open the door.')."""
    text = (text or "").strip()
    return text[1:].lstrip() if kind == "player" and text.startswith(">") else text


@dataclass(frozen=True)
class Line:
    """One story node as a recall unit, with the time in force where it was said."""

    node_id: int
    branch_id: int
    depth: int
    kind: str
    text: str
    hash: str
    stamp: Stamp | None = None


@dataclass(frozen=True)
class Summary:
    """An earlier summary, as a recall unit: its key and words made once."""

    id: int
    branch_id: int
    depth: int
    start: int | None
    end: int | None
    text: str
    hash: str
    words: frozenset
    key: tuple


@dataclass(frozen=True)
class PathLines:
    """The lines on a path as one read saw them: the first `count` of
    `lines` and `depths`, oldest first, and the first `id_count` of `ids`,
    the node ids of those with text (the ones that can have a vector); `by_id`
    each line by node id. The lists and the map are shared with later reads
    of a path grown from this one (they are only ever appended to), so they
    may run past this path's tip: read them only within the counts, and ask
    `by_id` only for ids on the path. Nothing is copied per read: copying
    a 10,000-turn story's three lists of 20,000 took ~1 ms of every turn."""

    lines: list[Line]
    depths: list[int]
    ids: list[int]
    by_id: dict[int, Line]
    count: int
    id_count: int

    def stamp_at(self, depth: int) -> Stamp | None:
        """The time in force at the line at `depth` (None if there is none)."""
        at = bisect.bisect_left(self.depths, depth, 0, self.count)
        return self.lines[at].stamp if at < self.count and self.depths[at] == depth else None


@dataclass
class _Grown:
    """The last path read (see `_stamped`): lists that are only ever appended
    to while the path grows at its tip, and replaced when it does not."""

    older: tuple
    deepest: object
    lines: list[Line] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    by_id: dict[int, Line] = field(default_factory=dict)


@dataclass
class _Index:
    """One campaign's lines, read incrementally (see the module docstring)."""

    nodes: dict[int, Line] = field(default_factory=dict)
    at: dict[int, dict[int, int]] = field(default_factory=dict)  # branch -> depth -> node id
    depths: dict[int, list[int]] = field(default_factory=dict)  # branch -> sorted depths
    stamps: dict[int, Line] = field(default_factory=dict)  # node id -> its Line with the time in force
    terms: dict[int, frozenset] = field(default_factory=dict)
    embedded: dict[str, set[str]] = field(default_factory=dict)  # model -> hashes with a vector
    unembedded: dict[str, set[int]] = field(default_factory=dict)  # model -> node ids whose text has none
    max_id: int = 0
    revision: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    postings: dict[str, set[int]] = field(default_factory=dict)  # word -> node ids holding it
    # The campaign's summaries, any branch, read by id once (a summary is
    # only ever added): branch -> its summaries and their depths, in order.
    summaries: dict[int, list[Summary]] = field(default_factory=dict)
    summary_depths: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    summary_id: int = 0
    last_path: _Grown | None = None  # `_stamped`

    def put(self, node_id: int, branch: int, depth: int, kind: str, text: str) -> None:
        if node_id in self.nodes:
            self.last_path = None  # a line read before changed
        line = self.nodes[node_id] = Line(node_id, branch, depth, kind, text, text_hash(text))
        for model, known in self.embedded.items():
            if line.hash in known or not text.strip():
                self.unembedded[model].discard(node_id)
            else:
                self.unembedded[model].add(node_id)
        for word in self.terms.pop(node_id, ()):
            self.postings.get(word, set()).discard(node_id)
        words = self.terms[node_id] = terms(spoken(kind, text))
        for word in words:
            self.postings.setdefault(word, set()).add(node_id)
        self.stamps.pop(node_id, None)
        row = self.at.setdefault(branch, {})
        if depth not in row:
            bisect.insort(self.depths.setdefault(branch, []), depth)
        row[depth] = node_id


_INDEXES: OrderedDict[tuple, _Index] = OrderedDict()
_GUARD = threading.Lock()


def _index(session, campaign_id: int) -> _Index:
    key = (CACHE.token(session), campaign_id)
    with _GUARD:
        index = _INDEXES.get(key)
        if index is None:
            index = _INDEXES[key] = _Index()
        _INDEXES.move_to_end(key)
        while len(_INDEXES) > INDEXED_CAMPAIGNS:
            _INDEXES.popitem(last=False)
    return index


def forget(session, campaign_id: int) -> None:
    """Drop a campaign's index (its nodes were rewritten wholesale)."""
    with _GUARD:
        _INDEXES.pop((CACHE.token(session), campaign_id), None)


def _refresh(session, campaign_id: int, index: _Index) -> None:
    """Read what changed since the index last looked: new nodes, revised texts."""
    connection = session.connection()
    rows = connection.execute(
        select(NodeRow.id, NodeRow.branch_id, NodeRow.depth, NodeRow.kind, NodeRow.text)
        .where(NodeRow.campaign_id == campaign_id, NodeRow.id > index.max_id).order_by(NodeRow.id)).all()
    for node_id, branch, depth, kind, text in rows:
        index.max_id = max(index.max_id, node_id)
        if kind in LINE_KINDS:
            index.put(node_id, branch, depth, kind, text)
    newest = connection.execute(select(func.max(NodeRevisionRow.id))
                                .where(NodeRevisionRow.campaign_id == campaign_id)).scalar() or 0
    if newest > index.revision:
        revised = connection.execute(select(NodeRow.id, NodeRow.branch_id, NodeRow.depth, NodeRow.kind, NodeRow.text)
                                     .where(NodeRow.id.in_(select(NodeRevisionRow.node_id).where(
                                         NodeRevisionRow.campaign_id == campaign_id,
                                         NodeRevisionRow.id > index.revision)))).all()
        for node_id, branch, depth, kind, text in revised:
            if kind in LINE_KINDS:
                index.put(node_id, branch, depth, kind, text)
                CACHE.drop((CACHE.token(session), campaign_id, LINES), node_id)
        index.stamps.clear()  # a revised line can change the time every later line carries
        index.last_path = None
        index.revision = newest


def path_lines(session, campaign_id: int, path: Path, before: int | None = None,
               since: int | None = None) -> list[Line]:
    """The lines on `path` (shallower than `before`, and no shallower than
    `since`, when given), oldest first, each with the time in force where it
    was said."""
    index = _index(session, campaign_id)
    with index.lock:
        _refresh(session, campaign_id, index)
        grown = _stamped(index, path)
        lo = 0 if since is None else bisect.bisect_left(grown.depths, since)
        hi = len(grown.depths) if before is None else bisect.bisect_left(grown.depths, before)
        return grown.lines[lo:hi]


def path_view(session, campaign_id: int, path: Path) -> PathLines:
    """The lines on `path` as `PathLines`: nothing copied or rebuilt line by line."""
    index = _index(session, campaign_id)
    with index.lock:
        _refresh(session, campaign_id, index)
        grown = _stamped(index, path)
        return PathLines(grown.lines, grown.depths, grown.ids, grown.by_id, len(grown.lines), len(grown.ids))


def _stamped(index: _Index, path: Path) -> _Grown:
    """The path's lines with their times. The last path read is kept: a
    turn's path is the last one grown at its tip, so only the new lines are
    read (walking 2,000 lines twice a turn grew with the story)."""
    last = index.last_path
    if last is not None and last.older == path.segments[1:] and path.segments and last.deepest is not None \
            and last.deepest.branch_id == path.segments[0].branch_id \
            and last.deepest.first == path.segments[0].first and last.deepest.last <= path.segments[0].last:
        grown = last
        segment = path.segments[0]
        fresh = _read(index, segment.branch_id, last.deepest.last + 1, segment.last)
    else:
        grown, fresh = _Grown((), None), []
        for segment in reversed(path.segments):  # the root's branch first
            fresh.extend(_read(index, segment.branch_id, segment.first, segment.last))
    # The time in force at each line, worked out once per node: a node's
    # ancestors never change, so neither does the time it was said at.
    stamp: Stamp | None = grown.lines[-1].stamp if grown.lines else None
    for line in fresh:
        held = index.stamps.get(line.node_id)
        if held is None:
            stamp = advance(stamp, line.text, line.kind)
            held = index.stamps[line.node_id] = Line(line.node_id, line.branch_id, line.depth, line.kind,
                                                     line.text, line.hash, stamp)
        stamp = held.stamp
        grown.lines.append(held)
        grown.depths.append(held.depth)
        grown.by_id[held.node_id] = held
        if held.text.strip():
            grown.ids.append(held.node_id)
    grown.older, grown.deepest = path.segments[1:], path.segments[0] if path.segments else None
    index.last_path = grown
    return grown


def _read(index: _Index, branch: int, first: int, last: int) -> list[Line]:
    depths = index.depths.get(branch, [])
    row = index.at.get(branch, {})
    lo, hi = bisect.bisect_left(depths, first), bisect.bisect_right(depths, last)
    return [index.nodes[row[d]] for d in depths[lo:hi]]


def line_terms(session, campaign_id: int, lines: Sequence[Line]) -> dict[int, frozenset]:
    """{node id: its meaningful words}, worked out once per node text."""
    index = _index(session, campaign_id)
    with index.lock:
        out = {}
        for line in lines:
            found = index.terms.get(line.node_id)
            if found is None:
                found = index.terms[line.node_id] = terms(spoken(line.kind, line.text))
            out[line.node_id] = found
        return out


def holding(session, campaign_id: int, words) -> set[int]:
    """The ids of the lines (any branch) holding any of `words`, from the index's postings."""
    index = _index(session, campaign_id)
    with index.lock:
        _refresh(session, campaign_id, index)
        found: set[int] = set()
        for word in words:
            found |= index.postings.get(word, set())
        return found


def path_summaries(session, campaign_id: int, path: Path) -> list[Summary]:
    """The summaries on `path`, oldest first. A summary is only ever added
    (the guard writes a new one rather than rewriting), so each is read once
    per campaign and a turn reads only those newer than the last it saw: at
    10,000 turns the path holds ~670, and reading them whole twice a turn
    and making their keys and shown texts again was, once the lines were
    kept, most of what a recall still spent more at 10,000 turns than at
    1,000 (profiled)."""
    index = _index(session, campaign_id)
    with index.lock:
        rows = session.connection().execute(
            select(SummaryRow.id, SummaryRow.branch_id, SummaryRow.depth, SummaryRow.source_start,
                   SummaryRow.source_end, SummaryRow.text)
            .where(SummaryRow.campaign_id == campaign_id, SummaryRow.id > index.summary_id)
            .order_by(SummaryRow.id)).all()
        for i, branch, depth, start, end, text in rows:
            text = text or ""
            summary = Summary(i, branch, depth, start, end, text, text_hash(text), terms(text), ("summary", i))
            at = index.summary_depths.setdefault(branch, [])
            place = bisect.bisect(at, (depth, i))
            at.insert(place, (depth, i))
            index.summaries.setdefault(branch, []).insert(place, summary)
            index.summary_id = max(index.summary_id, i)
        out: list[Summary] = []
        for segment in reversed(path.segments):  # the root's branch first
            at = index.summary_depths.get(segment.branch_id, [])
            lo = bisect.bisect_left(at, (segment.first, -1))
            hi = bisect.bisect_left(at, (segment.last + 1, -1))
            out.extend(index.summaries.get(segment.branch_id, [])[lo:hi])
        return out


def rarest(session, campaign_id: int, words, most: float) -> list[set[int]]:
    """For each of `words` held by at least one line (any branch) and by no
    more than `most`, the ids of the lines holding it, the rarest word's
    first. Counted from the postings without copying a common word's."""
    index = _index(session, campaign_id)
    with index.lock:
        _refresh(session, campaign_id, index)
        held = sorted((len(index.postings[w]), w) for w in words if 0 < len(index.postings.get(w, ())) <= most)
        return [set(index.postings[w]) for _, w in held]


def _embedded(session, index: _Index, model_id: str) -> set[str]:
    """The hashes with a vector of this model; read once, then kept with the
    ids of the campaign's lines still waiting for one (`put` keeps both)."""
    known = index.embedded.get(model_id)
    if known is None:
        known = set(session.connection().execute(
            select(TextVectorRow.hash).where(TextVectorRow.model == model_id)).scalars())
        index.unembedded[model_id] = {i for i, line in index.nodes.items()
                                      if line.text.strip() and line.hash not in known}
        index.embedded[model_id] = known
    return known


def embed_texts(db, campaign_id: int, path: Path, embedder, limit: int = MAX_TEXT_BATCH) -> int:
    """Embed up to `limit` of the path's lines and summaries that have no
    vector from this model yet, newest first (the next turns recall them
    soonest); derived work, never in a turn."""
    model = embedder.model_id
    with db.reading() as s:
        summaries = path_summaries(s, campaign_id, path)
        index = _index(s, campaign_id)
        with index.lock:
            _refresh(s, campaign_id, index)
            known = _embedded(s, index, model)
            waiting = index.unembedded[model]
            for i in [i for i in waiting if index.nodes[i].hash in known]:  # embedded for another campaign
                waiting.discard(i)
            lines = sorted((index.nodes[i] for i in waiting
                            if path.contains(index.nodes[i].branch_id, index.nodes[i].depth)),
                           key=lambda line: line.depth)
            missing = [u for u in summaries if u.text.strip() and u.hash not in known]
    wanted: dict[str, str] = {}
    for u in reversed(missing):
        wanted.setdefault(u.hash, u.text)
    for line in reversed(lines):
        wanted.setdefault(line.hash, spoken(line.kind, line.text))
        if len(wanted) >= limit:
            break
    if not wanted:
        return 0
    hashes = list(wanted)[:limit]
    vectors = embedder.embed([wanted[h] for h in hashes])
    with db.writing() as s:
        present = set(s.scalars(select(TextVectorRow.hash).where(TextVectorRow.model == model,
                                                                 TextVectorRow.hash.in_(hashes))))
        for h, vector in zip(hashes, vectors, strict=True):
            if h not in present:
                s.add(TextVectorRow(hash=h, model=model, vector=pack(vector)))
    with db.reading() as s:
        index = _index(s, campaign_id)
        with index.lock:
            known = _embedded(s, index, model)
            known.update(hashes)
            done = set(hashes)
            waiting = index.unembedded[model]
            waiting.difference_update([line.node_id for line in lines if line.hash in done])
    return len(hashes)


def embed_story(db, campaign_id: int, embedder, limit: int = MAX_TEXT_BATCH) -> int:
    """`embed_texts` on the path being played now."""
    with db.reading() as s:
        campaign = s.get(CampaignRow, campaign_id)
        if campaign is None:
            return 0
        path = StoryTree(s, campaign).path()
    return embed_texts(db, campaign_id, path, embedder, limit)


def load_vectors(session, model_id: str, hashes: dict[int, str]) -> dict[int, bytes]:
    """{unit id: stored vector} for units given as {unit id: text hash}."""
    if not hashes:
        return {}
    by_hash: dict[str, bytes] = {}
    wanted = list(set(hashes.values()))
    for i in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
        by_hash.update(session.connection().execute(
            select(TextVectorRow.hash, TextVectorRow.vector)
            .where(TextVectorRow.model == model_id, TextVectorRow.hash.in_(wanted[i:i + 500]))).all())
    return {unit: by_hash[h] for unit, h in hashes.items() if h in by_hash}
