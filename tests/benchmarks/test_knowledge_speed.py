"""Speed targets of the knowledge library, recorded with pytest-benchmark.

Targets: importing a 1 MiB Markdown file (chunk + index, embeddings apart)
in < 2 s; hybrid retrieval over 4,000 passages with a precomputed query
vector in < 20 ms; a turn's retrieval with the default second stage over
4,000 passages, query embedding by the real models included, in <= 150 ms
on an idle machine. `make test` runs each once (--benchmark-disable).
"""
from dataclasses import replace

import numpy as np
import pytest

from engine.context import tokens
from engine.knowledge import Library, retrieve, scene_query
from engine.knowledge.intake import MAX_SOURCE_BYTES
from engine.providers.embedders import MINILM_ID
from engine.search import DEFAULT
from engine.search.query import query_parts
from engine.store import CampaignRow, Database
from engine.vectors import CACHE

pytestmark = pytest.mark.benchmark

# Generated text with a natural (Zipf) word distribution, so term frequencies
# look like a real setting bible: function words in every passage, a
# content word like "road" or "abbey" in a few percent of them. (A corpus where
# every scene word is in every passage makes FTS5 rank all 4,000 rows: 40 ms,
# measured; no real library looks like that.)
FUNCTION = ("the of and a to in is was he for it with as his on be at by i this had not are but from or have an "
            "they which one you were her all she there would their we him been has when who will more no if out "
            "so said what up its about into than them can only other new some could time these two may then do "
            "first any my now such like our over man me even most made after also did many before must through").split()
THEME = ("road north abbey fog crypt stair lantern chapel bell silent silver key sealed letter harbour tide gate "
         "wall tower river bridge market guild priest merchant sailor storm salt iron ledger cloister marsh reed "
         "boat rope oak stone timber hearth ale bread candle oil map seal oath debt monk vault grave").split()
SYLLABLES = "ka lo mi ren dar vel tor ish an el um bra sen gol fir nay tho quo zel pim or ast ber cal dun".split()


def _vocabulary() -> tuple[list[str], np.ndarray]:
    pseudo = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
    words = list(FUNCTION)
    theme = iter(THEME)
    for p in pseudo:
        if len(words) >= 60 and len(words) % 6 == 0:  # theme words at ranks ~60-400
            words.append(next(theme, p))
        words.append(p)
    weights = 1.0 / np.arange(1, len(words) + 1)
    return words, weights / weights.sum()


VOCAB, WEIGHTS = _vocabulary()


def document(n_bytes: int, seed: int = 7, paragraphs: tuple[int, int] = (3, 8)) -> str:
    """Markdown of about `n_bytes`: nested headings, prose paragraphs, a code block now and then."""
    rng = np.random.default_rng(seed)
    draws = iter(rng.choice(len(VOCAB), size=n_bytes // 3, p=WEIGHTS))
    parts, size, section = [], 0, 0
    while size < n_bytes:
        section += 1
        block = [f"# Part {section}", f"## Chapter {section} of the {VOCAB[next(draws)]}"]
        for _ in range(rng.integers(paragraphs[0], paragraphs[1] + 1)):
            sentences = [" ".join(VOCAB[next(draws)] for _ in range(rng.integers(6, 19))).capitalize() + "."
                         for _ in range(rng.integers(2, 8))]
            block.append(" ".join(sentences))
        if section % 7 == 0:
            block.append("```\n# a comment, not a heading\nroll = d20 + bonus\n```")
        text = "\n\n".join(block) + "\n\n"
        parts.append(text)
        size += len(text.encode())
    return "".join(parts).encode()[: n_bytes - 1].decode("utf-8", "ignore")


def new_campaign(db) -> int:
    with db.writing() as s:
        row = CampaignRow(title="bench", protagonist="Aldric")
        s.add(row)
        s.flush()
        return row.id


def test_import_a_1_mib_markdown_file(benchmark, tmp_path):
    db = Database(tmp_path / "import.db")
    one_mib = 1024 * 1024  # the target's size; sources may now be up to MAX_SOURCE_BYTES (16 MiB)
    data = document(one_mib).encode()
    assert one_mib - 64 < len(data) <= one_mib <= MAX_SOURCE_BYTES

    def fresh():
        tokens.count.cache_clear()  # a cold token cache, as for a file never seen before
        return (Library(db, new_campaign(db), progress=False),), {}

    result = benchmark.pedantic(lambda lib: lib.add("bible.md", data, classification="canon"), setup=fresh,
                                rounds=3, iterations=1)
    assert result["index_state"] == "ready" and result["passages"] > 100
    db.close()


class RandomMiniLM:
    """384-dimensional vectors under MiniLM's id, so its calibrated floor applies."""

    model_id = MINILM_ID

    def __init__(self):
        self.rng = np.random.default_rng(11)

    def embed(self, texts):
        return self.rng.normal(size=(len(texts), 384)).astype(np.float32)


@pytest.fixture(scope="module")
def big_library(tmp_path_factory):
    db = Database(tmp_path_factory.mktemp("bench") / "retrieval.db")
    campaign = new_campaign(db)
    embedder = RandomMiniLM()
    lib = Library(db, campaign, lambda: embedder, progress=False)
    for i in range(40):  # 40 sources of ~100 short sections each: 4,000+ passages
        cls = ("canon", "reference", "inspiration")[i % 3]
        lib.add(f"source-{i}.md", document(62_000, seed=i, paragraphs=(1, 2)), classification=cls)
    total = int(lib.list().passages.sum())
    assert total >= 4000, total
    from sqlalchemy import text

    with db.reading() as s:  # the query leans towards a handful of stored passages
        rows = s.execute(text("SELECT vector FROM knowledge_embeddings ORDER BY id LIMIT 5")).scalars().all()
    query_vector = np.mean([np.frombuffer(r, dtype="<f4") for r in rows], axis=0)
    yield db, campaign, embedder, query_vector, total
    db.close()


SCENE = ("Aldric climbs the road north to the abbey in the fog; the crypt stair is lit by one lantern and the "
         "chapel bell is silent. Mara holds the silver key and the sealed letter.")


def test_hybrid_retrieval_over_4000_passages(benchmark, big_library):
    db, campaign, embedder, query_vector, total = big_library

    def turn():
        return retrieve(db, campaign, SCENE, embedder=embedder, budget_tokens=8000, query_vector=query_vector)

    sel = benchmark.pedantic(turn, rounds=40, iterations=1, warmup_rounds=2)
    r = sel.report
    assert r["semantic_used"] and r["semantic_scanned"] == min(total, 4000)
    assert sel.passages and {"lexical", "semantic", "both"} & {p.found_by for p in sel.passages}
    assert r["spent"] <= int(8000 * 0.33)


def test_hybrid_retrieval_cold_vector_cache(benchmark, big_library):
    """The first turn after opening a file reads every vector: reported, not a target."""
    db, campaign, embedder, query_vector, _ = big_library

    def cold():
        CACHE.clear()
        return (), {}

    benchmark.pedantic(lambda: retrieve(db, campaign, SCENE, embedder=embedder, budget_tokens=8000,
                                        query_vector=query_vector), setup=cold, rounds=5, iterations=1)


PLAYED = [f"{SCENE} The wind turns; turn {i} goes on.\n\nMara answers in a low voice about the ledger and the "
          f"harbour tolls, and the lantern gutters." for i in range(3)] + ["> I unlock the crypt door."]


def test_hybrid_retrieval_of_a_played_scene(benchmark, big_library):
    """A scene as a turn searches with it: four story texts, seven paragraphs,
    each embedded (instantly here) and scored against the library."""
    db, campaign, embedder, _, total = big_library
    query = scene_query(PLAYED, ["Mara", "Aldric"])
    assert len(query_parts(query)) == 7

    def turn():
        return retrieve(db, campaign, query, embedder=embedder, budget_tokens=8000)

    sel = benchmark.pedantic(turn, rounds=40, iterations=1, warmup_rounds=2)
    assert sel.report["semantic_used"] and sel.report["lexical_required_newest"] is not None


# ---------------------------------------------------------------- the second stage (issue 25)
# The second-stage target is for an idle machine: at or above this one-minute
# load average the figure is recorded, not asserted. On 2 cores a load of 1
# is one core taken by other work, and the turn's two models then cannot run
# side by side (retrieval embeds the second model's query beside the first
# stage): a prepared turn measured 187 ms at load 1.0-1.3 against 151-159 ms
# idle (load 0.3-0.4). At load 4-5 the turn took 441 ms before this bench
# had prepared turns.
IDLE_LOAD = 1.0
class RandomStage:
    """768-dimensional vectors under the default relevance model's id
    (EmbeddingGemma-300M where installed, else all-mpnet-base-v2; both 768):
    the library's second-stage vectors, made instantly (what they say does
    not change what reading and scoring them costs)."""

    def __init__(self, model_id: str):
        self.model_id = model_id
        self.rng = np.random.default_rng(12)

    def embed(self, texts):
        return self.rng.normal(size=(len(texts), 768)).astype(np.float32)


class PlayedTurns:
    """A played sequence for the second-stage benches: each call to `next()`
    is a new turn, with a new player's line and a new reply of two or three
    paragraphs (within the default 200-token reply), generated from the
    documents' vocabulary so the lexical path finds candidates. The query is
    built as the turn runner builds it (`scene_query` over the newest story
    texts and the new line, standing names first), so no round asks a scene
    another round asked, and every round's line is new to both models."""

    NAMES = ["Mara", "Aldric"]

    def __init__(self, seed: int = 29):
        self.rng = np.random.default_rng(seed)
        self.story = [PLAYED[0]]
        self.line = self.reply = ""
        self.lines: list[str] = []

    def _words(self, low: int, high: int) -> str:
        return " ".join(VOCAB[i] for i in self.rng.choice(len(VOCAB), size=int(self.rng.integers(low, high)), p=WEIGHTS))

    def _reply(self) -> str:
        paragraphs = [". ".join(self._words(6, 16).capitalize() for _ in range(int(self.rng.integers(2, 5)))) + "."
                      for _ in range(int(self.rng.integers(2, 4)))]
        return tokens.last("\n\n".join(paragraphs), 200)  # a reply is cut at max_output_tokens

    def next(self) -> str:
        """The last turn's line and reply join the story; the new turn's query."""
        from engine.turns.inputs import player_line

        if self.line:
            self.story += [self.line, self.reply]
        self.line, self.reply = player_line(f"I {self._words(4, 12)}"), self._reply()
        self.lines.append(self.line)
        return scene_query([*self.story[-3:], self.line], self.NAMES)

    def lead(self) -> str:
        """The new turn's first query part: the names and the player's line."""
        return query_parts(scene_query([*self.story[-3:], self.line], self.NAMES))[0]


def _second_stage_setup(big_library, monkeypatch):
    """The library's second-stage vectors (stand-ins of the real shape, made
    instantly), the default stage (the real relevance model), and the real
    MiniLM for the query, both loaded and warm: loading is not a turn's cost."""
    from engine.knowledge import stage_for
    from engine.providers.embedders import MiniLMEmbedder
    from engine.search import calibration, stage_vectors
    from engine.search.calibration import calibration_key
    from engine.settings import Settings

    db, campaign, _, _, total = big_library
    stage = stage_for(Settings(), MINILM_ID)  # the defaults: "auto" behind the embedded MiniLM
    assert stage is not None  # which model the defaults choose is tested in tests/knowledge/test_second_stage.py
    if calibration.floor_for(stage.model_id) is None:  # timing does not depend on the floor's value
        monkeypatch.setitem(calibration.registry(), calibration_key(stage.model_id), {"floor": 0.3})
    stage_vectors.catch_up(db, campaign, RandomStage(stage.model_id), progress=False)
    first = MiniLMEmbedder()  # the passages' MiniLM vectors are stand-ins; the query is embedded for real
    first.embed(["warm the model"])
    stage.embedder.embed(["warm the model"])
    return db, campaign, total, first, stage, Settings()


def _median_ms(times: list[float]) -> float:
    import statistics

    return round(statistics.median(times) * 1000, 1)


@pytest.mark.realmodel
def test_retrieval_with_the_second_stage_over_4000_passages(benchmark, big_library, monkeypatch):
    """Target: a turn with the default second stage (the relevance model) over
    4,000 passages in <= 150 ms on an idle machine, its query embedded by the
    real models; the passage vectors were computed ahead (here: stand-ins of
    the same shape).

    Each round is a new turn of a played sequence (`PlayedTurns`). Timed by
    the benchmark, what the defaults do: after the last reply was stored its
    paragraphs were embedded off the turn's path (`knowledge.prepare_query`,
    which the turn's background thread runs; run here in the round's setup,
    untimed, as it runs while the player reads), so the turn embeds the
    player's new line with both models. Recorded beside it, not a target: a
    cold turn with every part new to both models (nothing prepared, nothing
    kept), and the first stage alone on prepared turns."""
    import os
    import time

    from engine.knowledge import prepare_query
    from engine.search import fusion_for
    from engine.vectors import QUERIES

    STAGE_CANDIDATES = DEFAULT.stage_candidates

    load = os.getloadavg()[0]
    db, campaign, total, first, stage, settings = _second_stage_setup(big_library, monkeypatch)
    played = PlayedTurns()
    QUERIES.clear()

    def prepared_turn():
        query = played.next()
        prepare_query(db, campaign, played.story[-4:], played.NAMES, embedder=first, settings=settings)
        assert not QUERIES.held(stage.model_id, played.lead())  # the new line is embedded in the timed turn
        return (query,), {}

    def turn(query, second_stage=stage):
        return retrieve(db, campaign, query, embedder=first, budget_tokens=8000, standing=played.NAMES,
                        second_stage=second_stage)

    rounds = 20 if benchmark.enabled else 1
    sel = benchmark.pedantic(turn, setup=prepared_turn, rounds=rounds, iterations=1, warmup_rounds=2)
    r = sel.report
    assert r["second_stage_used"] and r["semantic_used"] and r["semantic_scanned"] == min(total, 4000)
    # the defaults: the pair's fused score, where one was fitted, over each path's best STAGE_CANDIDATES
    # and the relevance model's own best of the library (fewer where the paths overlap)
    assert r["second_stage_fused"] == (fusion_for(MINILM_ID, stage.model_id) is not None)
    assert r["second_stage_scan"] == DEFAULT.scan_candidates
    assert STAGE_CANDIDATES <= r["second_stage_scored"] <= 2 * STAGE_CANDIDATES + DEFAULT.scan_candidates
    assert QUERIES.held(stage.model_id, played.lead()) and len(set(played.lines)) == len(played.lines)

    def timed(setup, **kw) -> list[float]:
        times = []
        for _ in range(rounds):
            (query,), _ = setup()
            started = time.perf_counter()
            out = turn(query, **kw)
            times.append(time.perf_counter() - started)
            assert out.report["second_stage_used"] == ("second_stage" not in kw)
        return times

    def cold_turn():
        query = played.next()
        QUERIES.clear()  # nothing prepared, nothing kept: every part is new to both models
        return (query,), {}

    cold = timed(cold_turn)
    first_alone = timed(prepared_turn, second_stage=None)
    median = benchmark.stats.stats.median * 1000 if benchmark.enabled else None
    benchmark.extra_info.update(
        candidates_scored=r["second_stage_scored"], load_average=round(load, 2),
        prepared_median_ms=round(median, 1) if median is not None else None,
        cold_median_ms=_median_ms(cold), first_stage_alone_prepared_median_ms=_median_ms(first_alone),
        target_ms=150, target_asserted=bool(benchmark.enabled and load < IDLE_LOAD),
        query_runs_through={"first": first.query_backend, "second": stage.embedder.query_backend})
    if benchmark.enabled and load < IDLE_LOAD:
        assert median <= 150, f"prepared turn {median:.0f} ms (cold {_median_ms(cold)} ms) at load {load:.2f}"


@pytest.mark.realmodel
def test_retrieval_with_the_second_models_scan_over_4000_passages(benchmark, big_library, monkeypatch):
    """Recorded, not a target: the same prepared turns with the second model
    scanning every passage's stored vector for its own best ten (4,000 x 768
    floats, held in memory between turns), named outright (the defaults scan
    too since the int8 relevance model's sweep chose it)."""
    from engine.knowledge import prepare_query
    from engine.vectors import QUERIES

    db, campaign, _, first, stage, settings = _second_stage_setup(big_library, monkeypatch)
    scanning = replace(DEFAULT, scan_candidates=10)
    played = PlayedTurns(seed=31)
    QUERIES.clear()

    def prepared_turn():
        query = played.next()
        prepare_query(db, campaign, played.story[-4:], played.NAMES, embedder=first, settings=settings)
        return (query,), {}

    def turn(query):
        return retrieve(db, campaign, query, embedder=first, budget_tokens=8000, standing=played.NAMES,
                        second_stage=stage, tuning=scanning)

    sel = benchmark.pedantic(turn, setup=prepared_turn, rounds=20 if benchmark.enabled else 1, iterations=1,
                             warmup_rounds=2)
    assert sel.report["second_stage_used"] and sel.report["second_stage_scan"] == 10


@pytest.mark.realmodel
def test_second_stage_embedding_rate_for_a_1_mb_document(benchmark, tmp_path):
    """Recorded against the goal of 10 minutes for a 4,000-passage library:
    how many passages the default relevance model embeds from a 1 MB
    document in the background pass, with the progress bar a reader sees. A
    sample of its passages is timed (the whole document takes minutes on a
    busy machine); the rate and the estimates are recorded."""
    import os
    import time

    from engine.knowledge import stage_for
    from engine.search import stage_vectors
    from engine.settings import Settings

    db = Database(tmp_path / "rate.db")
    campaign = new_campaign(db)
    lib = Library(db, campaign, progress=False)
    lib.add("bible.md", document(1024 * 1024), classification="reference")
    total = int(lib.list().passages.sum())
    model = stage_for(Settings(), MINILM_ID).embedder
    model.embed(["warm the model"])
    sample = 4 if benchmark.disabled else 64  # make test runs it once, small
    load = os.getloadavg()[0]

    def run():
        started = time.perf_counter()
        done = stage_vectors.catch_up(db, campaign, model, limit=sample, progress=True)
        return done, time.perf_counter() - started

    done, seconds = benchmark.pedantic(run, rounds=1, iterations=1)
    rate = done.embedded / seconds
    benchmark.extra_info.update(model=model.model_id, passages=total, sampled=done.embedded,
                                passages_per_second=round(rate, 2), load_at_start=round(load, 2),
                                estimated_minutes_for_document=round(total / rate / 60, 1),
                                estimated_minutes_for_4000_passages=round(4000 / rate / 60, 1))
    assert done.embedded == sample and done.remaining == total - sample
    db.close()
