"""`python -m engine.providers.query_exports`: export the two local models'
encoders for a turn's queries now (make setup runs it), so no turn waits for
it. Each export is checked against PyTorch's vectors on this CPU
(engine.providers.onnx_query); one that fails leaves that model's queries on
PyTorch and says so here. EmbeddingGemma-300M's export and its int8 copy are
made by its own installer (`python -m engine.providers.embeddinggemma`),
which make setup runs just before this."""
from __future__ import annotations

from .embedders import MiniLMEmbedder, MPNetEmbedder

__all__ = ["prepare"]


def prepare() -> list[str]:
    return [embedder.prepare_queries() for embedder in (MiniLMEmbedder, MPNetEmbedder)]


if __name__ == "__main__":
    for line in prepare():
        print(line)
