"""Measuring a semantic floor for an embedding model.

Scores the pair set's targeted and off-topic (scene, passage) pairs through
the production forms (engine.knowledge.calibrate), plots both populations
with the proposed floor, and writes the registry entry the engine reads when
the populations separate.
"""
from __future__ import annotations

__all__ = ["embedder_for", "plot", "populations"]


def embedder_for(backend: str, model: str = "", endpoint: str = ""):
    """'minilm' (embedded), 'mpnet' or 'embeddinggemma' (the embedded relevance
    models, their vectors through the evaluation's on-disk cache; Gemma's with
    its query and document prompts), 'gguf' (the embedded
    SmolLM2 file, mean-pooled), or 'endpoint' (an OpenAI-compatible
    /v1/embeddings on this machine or the LAN)."""
    from engine.providers import embedders

    if backend == "minilm":
        return embedders.MiniLMEmbedder()
    if backend == "mpnet":
        from .retrieval_eval import CachedEmbedder

        return CachedEmbedder(embedders.MPNetEmbedder())
    if backend in ("embeddinggemma", "embeddinggemma-int8"):
        from .retrieval_eval import CachedEmbedder

        return CachedEmbedder(embedders.EmbeddingGemmaEmbedder(int8=backend.endswith("int8")))
    if backend == "gguf":
        return embedders.LlamaEmbedder(model or None)
    if backend == "endpoint":
        return embedders.OpenAIEmbedder(endpoint, model)
    raise ValueError("backend must be 'minilm', 'mpnet', 'embeddinggemma', 'embeddinggemma-int8', 'gguf' or "
                     f"'endpoint', not {backend!r}")


def populations(calibration):
    import pandas as pd

    return pd.DataFrame([{"population": name, **vars(pop)} for name, pop in
                         (("targeted", calibration.targeted), ("off-topic", calibration.off_topic))]).set_index("population")


def plot(calibration):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.4))
    for kind, colour in (("off_topic", "#c44e52"), ("targeted", "#55a868")):
        scores = [s["cosine"] for s in calibration.scores if s["kind"] == kind]
        ax.hist(scores, bins=30, alpha=0.6, color=colour, label=f"{kind.replace('_', '-')} (n={len(scores)})")
    if calibration.floor is not None:
        ax.axvline(calibration.floor, color="k", ls="--", label=f"floor {calibration.floor}")
    ax.set(title=f"Cosine of scene and passage: {calibration.model_id}", xlabel="cosine", ylabel="pairs")
    ax.legend()
    fig.tight_layout()
    return fig
