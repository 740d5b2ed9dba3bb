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

__all__ = ["LINE_KINDS", "LINES", "SUMMARIES", "MAX_TEXT_BATCH", "Line", "text_hash", "spoken", "path_lines",
           "embed_texts", "embed_story", "load_vectors", "forget", "line_terms", "holding"]

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


@dataclass
class _Index:
    """One campaign's lines, read incrementally (see the module docstring)."""

    nodes: dict[int, Line] = field(default_factory=dict)
    at: dict[int, dict[int, int]] = field(default_factory=dict)  # branch -> depth -> node id
    depths: dict[int, list[int]] = field(default_factory=dict)  # branch -> sorted depths
    stamps: dict[int, Line] = field(default_factory=dict)  # node id -> its Line with the time in force
    terms: dict[int, frozenset] = field(default_factory=dict)
    embedded: dict[str, set[str]] = field(default_factory=dict)  # model -> hashes with a vector
    max_id: int = 0
    revision: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    postings: dict[str, set[int]] = field(default_factory=dict)  # word -> node ids holding it
    last_path: tuple | None = None  # (older segments, the deepest, its lines, their depths): `_stamped`

    def put(self, node_id: int, branch: int, depth: int, kind: str, text: str) -> None:
        if node_id in self.nodes:
            self.last_path = None  # a line read before changed
        self.nodes[node_id] = Line(node_id, branch, depth, kind, text, text_hash(text))
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


def path_lines(session, campaign_id: int, path: Path, before: int | None = None) -> list[Line]:
    """The lines on `path` (shallower than `before` when given), oldest
    first, each with the time in force where it was said."""
    index = _index(session, campaign_id)
    with index.lock:
        _refresh(session, campaign_id, index)
        stamped, depths = _stamped(index, path)
        if before is not None:
            return stamped[:bisect.bisect_left(depths, before)]
        return list(stamped)


def _stamped(index: _Index, path: Path) -> tuple[list[Line], list[int]]:
    """The path's lines with their times, and their depths. The last path
    read is kept: a turn's path is the last one grown at its tip, so only
    the new lines are read (walking 2,000 lines twice a turn grew with the
    story)."""
    last = index.last_path
    if last is not None and last[0] == path.segments[1:] and path.segments and last[1] is not None \
            and last[1].branch_id == path.segments[0].branch_id and last[1].first == path.segments[0].first \
            and last[1].last <= path.segments[0].last:
        stamped, depths = last[2], last[3]
        segment = path.segments[0]
        fresh = _read(index, segment.branch_id, last[1].last + 1, segment.last)
    else:
        stamped, depths, fresh = [], [], []
        for segment in reversed(path.segments):  # the root's branch first
            fresh.extend(_read(index, segment.branch_id, segment.first, segment.last))
    # The time in force at each line, worked out once per node: a node's
    # ancestors never change, so neither does the time it was said at.
    stamp: Stamp | None = stamped[-1].stamp if stamped else None
    for line in fresh:
        held = index.stamps.get(line.node_id)
        if held is None:
            stamp = advance(stamp, line.text, line.kind)
            held = index.stamps[line.node_id] = Line(line.node_id, line.branch_id, line.depth, line.kind,
                                                     line.text, line.hash, stamp)
        stamp = held.stamp
        stamped.append(held)
        depths.append(held.depth)
    index.last_path = (path.segments[1:], path.segments[0] if path.segments else None, stamped, depths)
    return stamped, depths


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


def _embedded(session, index: _Index, model_id: str) -> set[str]:
    known = index.embedded.get(model_id)
    if known is None:
        known = index.embedded[model_id] = set(session.connection().execute(
            select(TextVectorRow.hash).where(TextVectorRow.model == model_id)).scalars())
    return known


def embed_texts(db, campaign_id: int, path: Path, embedder, limit: int = MAX_TEXT_BATCH) -> int:
    """Embed up to `limit` of the path's lines and summaries that have no
    vector from this model yet, newest first (the next turns recall them
    soonest); derived work, never in a turn."""
    model = embedder.model_id
    with db.reading() as s:
        lines = path_lines(s, campaign_id, path)
        summaries = s.execute(select(SummaryRow.id, SummaryRow.text)
                              .where(path.clause(SummaryRow.branch_id, SummaryRow.depth))).all()
        index = _index(s, campaign_id)
        with index.lock:
            known = set(_embedded(s, index, model))
    wanted: dict[str, str] = {}
    for _, text in reversed(summaries):
        if text.strip() and text_hash(text) not in known:
            wanted.setdefault(text_hash(text), text)
    for line in reversed(lines):
        if line.text.strip() and line.hash not in known:
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
            _embedded(s, index, model).update(hashes)
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
