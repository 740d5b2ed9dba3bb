"""The query encoders exported to ONNX: the models' own vectors, faster, and
refused (queries back on PyTorch) whenever the export is not the checked one."""
import json
import logging
import sys

import numpy as np
import pytest

from engine.errors import ModelMismatch
from engine.providers import embedders, onnx_query
from engine.providers.embedders import MiniLMEmbedder, MPNetEmbedder

pytestmark = pytest.mark.realmodel

LINES = ["We sail at dawn.", "I ask the keeper about the lamp that went dark on the night of the wreck.",
         "Look around", "\"Who are you?\" I whisper, keeping the lantern low so the guards below cannot see it."]


def torch_vectors(embedder, texts):
    return embedder._model().encode(texts, convert_to_numpy=True, show_progress_bar=False)


@pytest.mark.parametrize("embedder", [MiniLMEmbedder, MPNetEmbedder], ids=["MiniLM", "mpnet"])
def test_the_installed_export_gives_each_models_own_vectors(embedder):
    """make setup exported both encoders (python -m engine.providers.query_exports),
    and a query's parts through ONNX Runtime are PyTorch's vectors: stored
    passage vectors and calibrated floors stay valid."""
    e = embedder()
    assert e.query_backend == "onnxruntime"
    stamp = json.loads((e._export_dir() / "query.onnx.json").read_text())
    assert stamp["weights_sha256"] == e._weights_digest() and stamp["largest_difference"] <= onnx_query.TOLERANCE
    got = e.embed(LINES)
    assert got.dtype == np.float32 and np.abs(got - torch_vectors(e, LINES)).max() < 1e-5


@pytest.fixture
def fresh_exports(tmp_path, monkeypatch):
    """The model cache moved to an empty folder and no session loaded yet."""
    monkeypatch.setenv("STORY_WORKBENCH_MODELS", str(tmp_path))
    monkeypatch.delitem(embedders._query_sessions, MiniLMEmbedder.model_id, raising=False)
    yield tmp_path / "all-MiniLM-L6-v2"
    embedders._query_sessions.pop(MiniLMEmbedder.model_id, None)  # the next test loads the installed one


def test_without_an_export_queries_run_through_pytorch_until_one_is_made(fresh_exports, caplog):
    e = MiniLMEmbedder()
    with caplog.at_level(logging.INFO, logger="engine.providers.onnx_query"):
        assert e.query_backend == "torch"
    assert "queries run through PyTorch" in caplog.text
    slow = e.embed(LINES)
    message = MiniLMEmbedder.prepare_queries()
    assert "exported and checked" in message and e.query_backend == "onnxruntime"
    assert sorted(p.name for p in fresh_exports.iterdir()) == ["query.onnx", "query.onnx.json"]
    assert np.abs(e.embed(LINES) - slow).max() < 1e-5
    assert "checked before" in MiniLMEmbedder.prepare_queries()


def test_an_export_that_does_not_reproduce_the_vectors_is_not_kept(fresh_exports, monkeypatch):
    monkeypatch.setattr(onnx_query, "TOLERANCE", -1.0)  # no export can meet it
    fresh_exports.mkdir(parents=True)
    with pytest.raises(ModelMismatch, match="does not reproduce its vectors"):
        onnx_query.export(MiniLMEmbedder._model(), fresh_exports, "digest")
    assert list(fresh_exports.iterdir()) == []  # nothing half-written beside the models
    assert "queries run through PyTorch, slower" in MiniLMEmbedder.prepare_queries()
    assert MiniLMEmbedder().query_backend == "torch"


def test_an_export_for_other_weights_or_changed_on_disk_is_refused(fresh_exports, caplog):
    fresh_exports.mkdir(parents=True)
    onnx_query.export(MiniLMEmbedder._model(), fresh_exports, "digest of these weights")
    assert onnx_query.load(fresh_exports, "digest of these weights") is not None
    with caplog.at_level(logging.WARNING, logger="engine.providers.onnx_query"):
        assert onnx_query.load(fresh_exports, "digest of other weights") is None
        assert "not the one checked against these weights" in caplog.text
        target = fresh_exports / "query.onnx"
        size = target.stat().st_size
        target.write_bytes(b"\0" * size)  # same size, not a model
        assert onnx_query.load(fresh_exports, "digest of these weights") is None
        assert "could not load" in caplog.text
        target.write_bytes(b"\0" * 10)
        assert onnx_query.load(fresh_exports, "digest of these weights") is None


def test_without_onnxruntime_queries_stay_on_pytorch(fresh_exports, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    message = MiniLMEmbedder.prepare_queries()
    assert "queries run through PyTorch, slower" in message
    assert not (fresh_exports / "query.onnx").exists() and MiniLMEmbedder().query_backend == "torch"
    assert MiniLMEmbedder().embed(LINES[:1]).shape == (1, 384)


class Failing:
    def run(self, *args, **kwargs):
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : a kernel failed")


def test_a_session_that_fails_mid_play_hands_the_query_to_pytorch(monkeypatch, caplog):
    """A query never fails because ONNX Runtime did: the same vectors come
    from PyTorch, and the model stays there for the rest of the process."""
    monkeypatch.setitem(embedders._query_sessions, MiniLMEmbedder.model_id, Failing())
    e = MiniLMEmbedder()
    with caplog.at_level(logging.WARNING, logger="engine.providers.embedders"):
        got = e.embed(LINES)
    assert np.abs(got - torch_vectors(e, LINES)).max() < 1e-5
    assert "ONNX Runtime failed on a query" in caplog.text and e.query_backend == "torch"
