"""The one vector cache: memories and passages, one bound, one keying rule,
one set of numerics."""
import os

import numpy as np
import pytest
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench, vectors
from engine.knowledge import vectors as passage_vectors
from engine.memory import recall
from engine.memory import vectors as memory_vectors
from engine.store import CampaignRow
from engine.store.memory_tables import MemoryRow
from engine.story import StoryTree
from engine.vectors import CACHE, CACHED_ENTRIES, Held, Token, VectorCache, pack

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


def read_both(wb, camp):
    embedder = wb.embedder_or_none()
    with wb.db.reading() as s:
        path = StoryTree(s, s.get(CampaignRow, camp.id)).path()
        remembered = recall(s, camp.id, path, embedder, 3, "the north road")
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
