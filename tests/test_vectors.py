"""The one vector cache: memories and passages, one bound, one keying rule,
one set of numerics."""
import os
import threading
from dataclasses import replace

import numpy as np
import pytest
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench, vectors
from engine.memory import recall
from engine.memory import vectors as memory_vectors
from engine.search import DEFAULT
from engine.search import vectors as passage_vectors
from engine.store import CampaignRow
from engine.store.memory_tables import MemoryRow
from engine.story import StoryTree
from engine.vectors import (
    CACHE,
    CACHED_ENTRIES,
    IN_FLIGHT_WAIT,
    QUERIES,
    QUERY_TEXTS,
    Held,
    TextVectors,
    Token,
    VectorCache,
    pack,
)

ROAD = "# The Road\n\nThe north road climbs past the abbey toward the pass.\n"


@pytest.fixture(autouse=True)
def empty_cache():
    CACHE.clear()
    yield
    CACHE.clear()


@pytest.fixture
def bench(tmp_path):
    wb = Workbench.open(tmp_path / "story.db", background=False)
    wb.configure(narrator=ScriptedNarrator(["On."]), embedder=BagOfWordsEmbedder(), memory_enabled=False,
                 auto_summarize=False)
    yield wb
    wb.close()


def campaign_with_both(wb, title="Road"):
    """A campaign with one memory and one embedded passage."""
    camp = wb.new_campaign(title, opening="The road forks.")
    camp.act("walk north")
    embedder = wb.embedder_or_none()
    with wb.db.writing() as s:
        branch, depth = camp.head
        text = "The north road climbs past the abbey."
        s.add(MemoryRow(campaign_id=camp.id, text=text, branch_id=branch, depth=depth, source_start=depth,
                        source_end=depth, vector=pack(embedder.embed([text])[0]), vector_model=embedder.model_id))
    camp.knowledge.add("road.md", ROAD)
    return camp


MEMORIES_ONLY = replace(DEFAULT, recall_lines=0)


def read_both(wb, camp):
    embedder = wb.embedder_or_none()
    with wb.db.reading() as s:
        path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
        # Memories alone (no played lines): the two kinds this test follows through the cache.
        remembered = recall(s, camp.id, path, embedder, 3, "the north road", tuning=MEMORIES_ONLY)
        passages = passage_vectors.load_matrix(s, passage_vectors.cache_key(wb.db, camp.id, embedder.model_id),
                                               camp.id, embedder.model_id)
    return remembered, passages


def test_the_numerics_are_defined_once():
    for name in ("pack", "unpack", "unit", "cosines"):
        assert getattr(passage_vectors, name) is getattr(vectors, name)
    for name in ("pack", "unpack", "cosines", "CACHE"):
        assert getattr(memory_vectors, name) is getattr(vectors, name)


def test_memories_and_passages_of_a_campaign_share_the_one_bounded_cache(bench, monkeypatch):
    camp = campaign_with_both(bench)
    remembered, passages = read_both(bench, camp)
    assert remembered.used and len(passages) == 1
    model = bench.embedder_or_none().model_id
    keys = CACHE.keys()
    assert [k[1:] for k in keys] == [(camp.id, "memories", model), (camp.id, "passages", model)]
    token = keys[0][0]
    assert isinstance(token, Token) and keys[1][0] == token  # one open database, one token, both kinds
    assert token == CACHE.token(bench.db) and token.path == os.path.abspath(bench.db.path)
    assert CACHE.size == CACHED_ENTRIES

    monkeypatch.setattr(CACHE, "size", 3)
    other = campaign_with_both(bench, "Other")
    read_both(bench, other)  # two more entries: the least recently used (camp's memories) goes
    assert [k[1:3] for k in CACHE.keys()] == [(camp.id, "passages"), (other.id, "memories"),
                                              (other.id, "passages")]
    read_both(bench, camp)  # camp's memories come back; other's memories were used least recently
    assert len(CACHE) == 3 and [k[1:3] for k in CACHE.keys()] == [
        (other.id, "passages"), (camp.id, "memories"), (camp.id, "passages")]


def test_an_unchanged_request_returns_the_same_entry_and_a_drop_by_path_reaches_every_open_copy():
    cache = VectorCache(size=4)
    a, b, elsewhere = Token("/x/story.db", "a"), Token("/x/story.db", "b"), Token("/y/story.db", "c")
    blobs = {1: pack([3, 4]), 2: pack([0, 2]), 3: pack([1, 0])}
    asked = []

    def load(ids):
        asked.append(list(ids))
        return {i: blobs[i] for i in ids}

    first = cache.get((a, 1, "memories", "m"), [1, 2], load)
    assert first.ids == (1, 2) and np.allclose(first.vectors, [[0.6, 0.8], [0, 1]])
    assert cache.get((a, 1, "memories", "m"), [1, 2], load) is first and asked == [[1, 2]]
    cache.get((b, 1, "memories", "m"), [1], load)
    cache.get((elsewhere, 1, "memories", "m"), [1], load)

    blobs[1] = pack([0, 5])
    cache.drop(("/x/story.db", 1, "memories"), 1)  # a writer knows the path, not which copy is open
    asked.clear()
    again = cache.get((a, 1, "memories", "m"), [1, 2], load)
    assert asked == [[1]] and np.allclose(again.vectors, [[0, 1], [0, 1]])
    assert np.allclose(cache.get((b, 1, "memories", "m"), [1], load).vectors, [[0, 1]])
    assert np.allclose(cache.get((elsewhere, 1, "memories", "m"), [1], load).vectors, [[0.6, 0.8]])

    shrunk = cache.get((a, 1, "memories", "m"), [2, 3], load)  # ids not wanted leave; only 3 is read
    assert shrunk.ids == (2, 3) and asked[-1] == [3]
    assert isinstance(shrunk, Held) and np.allclose(shrunk[3], [1, 0]) and 1 not in shrunk


def test_mixed_widths_are_refused():
    cache = VectorCache()
    with pytest.raises(ValueError, match="mixed widths"):
        cache.get(("k",), [1, 2], lambda ids: {1: pack([1, 0]), 2: pack([1, 0, 0])})


def test_an_entry_built_while_its_kind_is_dropped_is_served_but_not_kept():
    """A writer's drop can land between a reader's read and its store: the
    reader's snapshot may hold the old vector, so that entry must not stay."""
    cache = VectorCache()
    memories, passages = (Token("/x/story.db", "a"), 1, "memories", "m"), (Token("/x/story.db", "a"), 1, "passages", "m")
    asked = []

    def load_during_a_drop(ids):
        asked.append(list(ids))
        cache.drop(("/x/story.db", 1, "memories"), 1)
        return {i: pack([1, 0]) for i in ids}

    assert cache.get(memories, [1], load_during_a_drop).ids == (1,)
    assert cache.keys() == []  # served, not kept
    cache.get(passages, [7], load_during_a_drop)  # a drop of memories does not stop passages being kept
    assert cache.keys() == [passages]


# ---------------------------------------------------------------- query texts (QUERIES)
class CountingEmbedder:
    """Vectors that depend only on the text, and a record of every text each
    call embedded; `hold` (an Event) keeps a call waiting until it is set."""

    def __init__(self, model_id="counting", hold=None, fail=False):
        self.model_id = model_id
        self.calls: list[list[str]] = []
        self.hold, self.fail = hold, fail
        self.entered = threading.Event()

    def embed(self, texts):
        self.calls.append(list(texts))
        self.entered.set()
        if self.hold is not None:
            self.hold.wait(5)
        if self.fail:
            raise ConnectionError("the embedder is down")
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


def test_a_query_text_is_embedded_once_and_a_changed_text_anew():
    cache, embedder = TextVectors(size=8), CountingEmbedder()
    first = cache.embed(embedder, ["the crypt stair", "a lantern"])
    again = cache.embed(embedder, ["> I open the door.", "the crypt stair", "a lantern"])
    assert embedder.calls == [["the crypt stair", "a lantern"], ["> I open the door."]]
    assert np.array_equal(again[1:], first) and again.shape == (3, 3)
    cache.embed(embedder, ["the crypt stair."])  # one character changed: a new text
    assert embedder.calls[-1] == ["the crypt stair."]
    twice = cache.embed(embedder, ["a bell", "a bell"])  # repeated within one call: embedded once
    assert embedder.calls[-1] == ["a bell"] and np.array_equal(twice[0], twice[1])


def test_query_texts_are_kept_per_model_and_rows_cannot_be_changed_by_a_caller():
    cache, a, b = TextVectors(), CountingEmbedder("model-a"), CountingEmbedder("model-b")
    row = cache.embed(a, ["the abbey"])
    cache.embed(b, ["the abbey"])
    assert a.embedded == b.embedded == ["the abbey"]
    row[0, 0] = -1.0  # the caller's copy, not the held row
    assert cache.embed(a, ["the abbey"])[0, 0] == len("the abbey")
    assert cache.held("model-a", "the abbey") and not cache.held("model-c", "the abbey")


def test_the_query_cache_is_bounded_least_recently_used_out():
    cache, embedder = TextVectors(size=3), CountingEmbedder()
    cache.embed(embedder, ["one", "two", "three"])
    cache.embed(embedder, ["one"])  # used again: "two" is now the least recently used
    cache.embed(embedder, ["four"])
    assert len(cache) == 3 and not cache.held("counting", "two")
    assert all(cache.held("counting", t) for t in ("one", "three", "four"))
    cache.embed(embedder, ["two"])
    assert embedder.calls[-1] == ["two"] and QUERY_TEXTS == QUERIES.size


def test_a_failed_embedding_is_raised_and_nothing_is_kept():
    cache = TextVectors()
    with pytest.raises(ConnectionError):
        cache.embed(CountingEmbedder(fail=True), ["the abbey"])
    assert len(cache) == 0
    working = CountingEmbedder()
    cache.embed(working, ["the abbey"])
    assert working.embedded == ["the abbey"]


def test_threads_asking_the_same_texts_embed_each_text_once():
    """Many threads at once, overlapping texts: every text is embedded by
    exactly one of them, and every thread gets the same rows."""
    cache, embedder = TextVectors(size=64), CountingEmbedder()
    texts = [f"paragraph {i}" for i in range(12)]
    results, errors = {}, []
    start = threading.Barrier(8)

    def ask(n):
        try:
            start.wait()
            wanted = texts[n % 4:n % 4 + 8]
            results[n] = (wanted, cache.embed(embedder, wanted))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    [t.start() for t in threads]
    [t.join(10) for t in threads]
    assert not errors and len(results) == 8
    assert sorted(embedder.embedded) == sorted(set(embedder.embedded))  # none embedded twice
    expected = {t: cache.embed(embedder, [t])[0] for t in texts}
    for wanted, rows in results.values():
        assert all(np.array_equal(row, expected[t]) for t, row in zip(wanted, rows, strict=True))


def test_a_text_being_embedded_elsewhere_is_waited_for_not_embedded_twice():
    cache, release = TextVectors(), threading.Event()
    slow = CountingEmbedder(hold=release)
    background = threading.Thread(target=cache.embed, args=(slow, ["the reply's paragraph"]))
    background.start()
    assert slow.entered.wait(5)
    turn = CountingEmbedder()
    threading.Timer(0.2, release.set).start()
    rows = cache.embed(turn, ["> I wait.", "the reply's paragraph"])
    background.join(5)
    assert turn.embedded == ["> I wait."] and slow.embedded == ["the reply's paragraph"]
    assert rows.shape == (2, 3)


def test_a_text_whose_embedding_failed_elsewhere_is_embedded_by_the_waiter():
    cache, release = TextVectors(), threading.Event()
    failing = CountingEmbedder(hold=release, fail=True)
    background = threading.Thread(target=lambda: pytest.raises(ConnectionError, cache.embed, failing, ["text"]))
    background.start()
    assert failing.entered.wait(5)
    threading.Timer(0.1, release.set).start()
    turn = CountingEmbedder()
    assert cache.embed(turn, ["text"]).shape == (1, 3) and turn.embedded == ["text"]
    background.join(5)


def test_a_waiter_gives_up_on_a_stuck_embedding_after_its_bound():
    cache, release = TextVectors(wait=0.1), threading.Event()
    stuck = CountingEmbedder(hold=release)
    background = threading.Thread(target=cache.embed, args=(stuck, ["text"]))
    background.start()
    assert stuck.entered.wait(5)
    turn = CountingEmbedder()
    assert cache.embed(turn, ["text"]).shape == (1, 3) and turn.embedded == ["text"]
    release.set()
    background.join(5)
    assert IN_FLIGHT_WAIT > 4.6  # longer than the slowest single query embedding measured


def test_rows_asked_for_after_the_held_ones_are_stacked_on():
    """A story's lines grow at the tip: the rows held are kept as they are and
    only the new ones read."""
    held = vectors.Held((1, 2), vectors.unit(np.eye(3)[:2]), (1, 2))
    asked = []

    def load(missing):
        asked.append(list(missing))
        return {3: vectors.pack([0.0, 0.0, 2.0]), 4: b""}

    ids, matrix = vectors.refreshed(held, [1, 2, 3, 4], load)
    assert ids == (1, 2, 3) and asked == [[3, 4]]  # 4 has no vector yet: left out
    assert np.allclose(matrix, np.eye(3))


def test_a_growing_list_of_ids_is_read_at_its_tail_and_a_late_vector_joins_in_order():
    """A story's lines: each read asks only for the ids after the last one,
    the rows written so far stay as an earlier entry saw them, and a line
    embedded after later ones (an imported story, embedded newest first) is
    read into its place."""
    cache, ids, stored, asked = VectorCache(), [1, 2], {1: [1.0, 0, 0], 2: [0, 1.0, 0]}, []

    def load(missing):
        asked.append(sorted(missing))
        return {i: pack(stored[i]) for i in missing if i in stored}

    first = cache.grown(("db", 1, "lines", "m"), ids, 2, load)
    assert first.ids == (1, 2) and asked == [[1, 2]]
    assert cache.grown(("db", 1, "lines", "m"), ids, 2, load) is first and len(asked) == 1  # nothing new: no read
    ids += [3, 4]
    stored[4] = [0, 0, 1.0]  # 3 has no vector yet
    second = cache.grown(("db", 1, "lines", "m"), ids, 4, load)
    assert second.ids == (1, 2, 4) and asked[-1] == [3, 4]
    assert first.ids == (1, 2) and np.allclose(first.vectors, np.eye(3)[:2])  # the earlier entry is as it was
    stored[3] = [1.0, 1.0, 0]
    third = cache.grown(("db", 1, "lines", "m"), ids, 4, load)
    assert third.ids == (1, 2, 3, 4) and third.rows[4] == 3
    assert np.allclose(third[3], vectors.unit([1.0, 1.0, 0])[0])
    ids.append(5)
    stored[5] = [0, 1.0, 1.0]
    fourth = cache.grown(("db", 1, "lines", "m"), ids, 5, load)
    assert fourth.ids == (1, 2, 3, 4, 5) and asked[-1] == [5]  # only the new id read
    assert cache.grown(("db", 1, "lines", "m"), [1, 2, 4], 3, load).ids == (1, 2, 4)  # another list: read as asked
