"""EmbeddingGemma-300M itself: its prompts applied, query against document.
Needs the installed model (make setup; skipped with the reason otherwise)."""
import numpy as np
import pytest

from engine.providers import embeddinggemma as gemma
from engine.providers.mpnet import cache_root
from engine.search.calibration import calibration_key

PASSAGES = ["The Old Abbey\nThe abbey bell rings at dawn over the sleeping monks.",
            "Harbour notices\nTide tables for the harbour in March."]
SCENE = "At sunrise I climb the monastery tower and pull the bell rope."


@pytest.mark.realmodel
@pytest.mark.skipif(not gemma.verified(cache_root() / gemma.FOLDER),
                    reason="EmbeddingGemma-300M is not installed (make setup without GEMMA=0, or "
                           "python -m engine.providers.embeddinggemma)")
def test_documents_and_queries_get_the_models_own_prompts():
    from engine.providers.embedders import GEMMA_ID, Embedder, EmbeddingGemmaEmbedder

    embedder = EmbeddingGemmaEmbedder()
    model = embedder._model()
    assert model.prompts["document"] == gemma.DOCUMENT_PROMPT and model.prompts["query"] == gemma.QUERY_PROMPT
    assert model.max_seq_length == embedder.max_seq

    if EmbeddingGemmaEmbedder.query_export_ready():  # make setup exported it: queries run through ONNX Runtime
        assert embedder.query_backend == "onnxruntime"
    documents = embedder.embed(PASSAGES)
    query = embedder.embed_query([SCENE])
    assert documents.shape == (2, 768) and documents.dtype == np.float32 and embedder.model_id == GEMMA_ID
    # sentence-transformers' own prompt handling gives the same vectors (the query maybe through ONNX Runtime)
    assert np.abs(documents - model.encode_document(PASSAGES, convert_to_numpy=True)).max() < 1e-5
    assert np.abs(query - model.encode_query([SCENE], convert_to_numpy=True)).max() < 1e-5
    bare = model.encode(PASSAGES[:1], convert_to_numpy=True)  # no prompt: another vector
    assert float(documents[0] @ bare[0]) < 0.99
    assert float(embedder.embed_query(PASSAGES[:1])[0] @ documents[0]) < 0.99  # the query side is not the document side
    scores = documents @ query[0]
    assert scores[0] > scores[1] + 0.1  # the abbey, not the tide tables

    side = embedder.queries()
    assert isinstance(side, Embedder) and side.model_id == f"{GEMMA_ID}#query"
    assert np.array_equal(side.embed([SCENE]), query)

    if gemma.exported(EmbeddingGemmaEmbedder._export_dir(), gemma.weights_sha256(), int8=True):
        small = EmbeddingGemmaEmbedder(int8=True)  # its own vectors, near fp32's, under its own id
        near, asked = small.embed(PASSAGES), small.embed_query([SCENE])
        assert small.model_id == f"{GEMMA_ID}-int8" and small.query_backend == "onnxruntime int8"
        assert (near * documents).sum(1).min() > 0.9 and float(asked[0] @ query[0]) > 0.9
        assert (near @ asked[0])[0] > (near @ asked[0])[1] + 0.1
        # a text's vector is its own, whatever it is embedded beside (dynamic int8 scales by the batch)
        # (batched, they differed by about 0.02 in 1 - cosine)
        assert np.allclose(small.embed(PASSAGES[:1])[0], near[0], atol=1e-5)
        assert np.allclose(small.embed_query([SCENE, PASSAGES[0] * 3])[0], asked[0], atol=1e-5)

    short = EmbeddingGemmaEmbedder(dims=256)
    kept = short.embed(PASSAGES)
    assert short.model_id == f"{GEMMA_ID}-256d" and kept.shape == (2, 256)
    # a variant never reads the full model's floor: each needs its own measurement
    assert len({calibration_key(m) for m in (GEMMA_ID, f"{GEMMA_ID}-int8", short.model_id)}) == 3
    assert np.allclose(np.linalg.norm(kept, axis=1), 1.0, atol=1e-5)
    assert np.allclose(kept, documents[:, :256] / np.linalg.norm(documents[:, :256], axis=1, keepdims=True), atol=1e-5)
