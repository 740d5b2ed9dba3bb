import numpy as np
import pytest

from engine.providers.embedders import (
    MINILM_ID,
    PADDING_SLACK,
    QUERY_TEXTS,
    Embedder,
    LlamaEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    length_groups,
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


QUERY = ["Mara, Aldric\n> I unlock the crypt door.",  # a player's line, then story paragraphs of other lengths
         "The stair turns twice in the dark, and at the bottom the keystone shows a broken circle cut deep into "
         "the stone; Mara lifts the lantern and reads the letters under it, one by one, aloud.",
         "The bell is silent.",
         "Fog comes up the road from the harbour, over the market and the guild hall, and the tide is turning."]


def test_a_querys_parts_are_grouped_by_alike_length():
    """A short line never shares a forward pass with a paragraph; paragraphs
    of alike length do (each pass has a fixed cost), within the slack."""
    lengths = [18, 73, 48, 93, 9, 63, 83, 33]
    groups = length_groups(["x" * n for n in lengths])
    assert sorted(i for g in groups for i in g) == list(range(8))
    assert [[lengths[i] for i in g] for g in groups] == [[93, 83, 73, 63], [48, 33], [18], [9]]
    for g in groups:
        padded, own = len(g) * lengths[g[0]], sum(lengths[i] for i in g)
        assert padded <= (1 + PADDING_SLACK) * own
    assert length_groups([]) == [] and length_groups(["same", "same"]) == [[0, 1]]


@pytest.mark.realmodel
def test_a_querys_parts_are_embedded_unpadded_and_match_the_batched_vectors(monkeypatch):
    """Grouped by length (`length_groups`): no part is padded to a much
    longer one, and the vectors are the batched ones (padding is masked out
    of them), so nothing calibrated on batched vectors moves."""
    from engine.providers import onnx_query

    embedder = MiniLMEmbedder()
    model = embedder._model()
    batched = model.encode(QUERY, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
    asked, passes = [], []
    encode, run_onnx = model.encode, onnx_query.encode
    monkeypatch.setattr(model, "encode", lambda texts, **kw: asked.append(list(texts)) or encode(texts, **kw))
    monkeypatch.setattr(onnx_query, "encode", lambda m, s, texts: passes.append(list(texts)) or run_onnx(m, s, texts))
    assert embedder.query_backend == "onnxruntime"  # make setup exported the query encoder
    apart = embedder.embed(QUERY)
    assert sorted(map(sorted, passes)) == sorted(sorted(QUERY[i] for i in g) for g in length_groups(QUERY))
    assert [QUERY[0]] in passes and len(passes) > 1 and len(QUERY) <= QUERY_TEXTS and asked == []
    assert apart.shape == (4, 384) and np.abs(apart - batched).max() < 1e-5
    passes.clear()
    many = embedder.embed(QUERY * 3)  # more than a query's parts: passages, in batches, through PyTorch
    assert asked == [QUERY * 3] and passes == [] and np.abs(many[:4] - batched).max() < 1e-5


@pytest.mark.realmodel
def test_gguf_embeddings_from_the_embedded_model():
    embedder = LlamaEmbedder()
    v = embedder.embed(["a lantern on the stair", "a lantern on the stair", "tax law"])
    assert embedder.model_id == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf:mean"
    assert v.shape == (3, 576) and v.dtype == np.float32
    assert cosine(v[0], v[1]) == pytest.approx(1.0, abs=1e-5)
