import numpy as np
import pytest

from engine.providers.embedders import (
    MINILM_ID,
    Embedder,
    LlamaEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
)


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_endpoint_embeddings_are_batched_and_kept_in_order(fake_server):
    embedder = OpenAIEmbedder(fake_server.base, "nomic-embed-text", batch=2)
    texts = ["red door", "blue sea", "red door", "green hill", "blue sea"]
    vectors = embedder.embed(texts)
    assert isinstance(embedder, Embedder) and embedder.model_id == "nomic-embed-text"
    assert vectors.shape == (5, 8) and vectors.dtype == np.float32
    assert np.array_equal(vectors[0], vectors[2]) and np.array_equal(vectors[1], vectors[4])
    batches = [b["input"] for _, p, b in fake_server.requests if p == "/v1/embeddings"]
    assert batches == [texts[0:2], texts[2:4], texts[4:5]]
    assert embedder.embed([]).shape == (0, 0)


@pytest.mark.realmodel
def test_minilm_scores_related_sentences_above_unrelated():
    embedder = MiniLMEmbedder()
    v = embedder.embed([
        "The abbey bell rings at dawn over the sleeping monks.",
        "At sunrise the monastery's bell tolls for the brothers.",
        "Tide tables for the harbour in March.",
    ])
    assert embedder.model_id == MINILM_ID and v.shape == (3, 384) and v.dtype == np.float32
    assert cosine(v[0], v[1]) > 0.5 > 0.2 > cosine(v[0], v[2])


@pytest.mark.realmodel
def test_gguf_embeddings_from_the_embedded_model():
    embedder = LlamaEmbedder()
    v = embedder.embed(["a lantern on the stair", "a lantern on the stair", "tax law"])
    assert embedder.model_id == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf:mean"
    assert v.shape == (3, 576) and v.dtype == np.float32
    assert cosine(v[0], v[1]) == pytest.approx(1.0, abs=1e-5)
