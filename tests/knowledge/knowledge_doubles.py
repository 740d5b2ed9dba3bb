"""Test embedders. They live here, never in engine/."""
from __future__ import annotations

import re
import zlib

import numpy as np

# Disjoint topic axes: a text's score on an axis is how many of its words
# belong to it. Shared words with a passage move the vector only a little,
# the topic a lot, which is the shape of a real model's behaviour.
AXES = {
    "abbey": {"abbey", "crypt", "monastery", "monks", "brothers", "vault", "burial", "tomb", "tombs", "chapel",
              "keystone", "stair", "circle", "broken", "emblem", "carved", "ruined", "priory", "cloister",
              "undercroft", "bones", "ossuary", "skulls", "chancel", "sanctuary", "remains", "church"},
    "tavern": {"tavern", "taverns", "inn", "ale", "hearth", "hearths", "benches", "candles", "lamps",
               "timber", "alehouse", "fireplace", "beer"},
    "harbour": {"tide", "tides", "harbour", "container", "tonnage", "berth", "crane", "ship", "freighter",
                "harbourmaster", "cargo"},
    "kiln": {"kiln", "glaze", "cone", "soak", "pottery"},
    "surgery": {"surgeon", "cannula", "infusion", "pump", "anaesthetist", "sterilised"},
    "compiler": {"compiler", "borrow", "lifetime", "referent", "diagnostic"},
}
_WORD = re.compile(r"[a-z0-9-]+")
BASE = 0.9
TOPIC = 1.6
BUCKETS = 64


class TopicEmbedder:
    """Deterministic and roughly realistic: unrelated texts score ~0.2-0.45
    (a constant component puts a floor under every pair, as in real models),
    texts on the same topic ~0.6-0.9."""

    model_id = "test-topic-embedder"

    def __init__(self, model_id: str | None = None):
        if model_id:
            self.model_id = model_id
        self.calls = 0

    def vector(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        unique = set(words)
        topic = [TOPIC * min(len(unique & axis), 4) / 4 for axis in AXES.values()]
        buckets = np.zeros(BUCKETS)
        for w in unique:
            buckets[zlib.crc32(w.encode()) % BUCKETS] += 0.25
        buckets /= max(len(unique), 1) ** 0.5
        return np.concatenate([[BASE], topic, buckets]).astype(np.float32)

    def embed(self, texts):
        self.calls += 1
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])


class GenerousEmbedder:
    """Scores every pair of texts about 0.998: the dangerous shape a floor
    borrowed from another model would let through."""

    model_id = "generous-embedder"

    def embed(self, texts):
        return np.array([[1.0, 0.25] if "kiln" in t.lower() else [1.0, 0.2] for t in texts], dtype=np.float32)


class FailingEmbedder:
    model_id = "test-topic-embedder"

    def __init__(self, message: str = "connection refused"):
        self.message = message

    def embed(self, texts):
        raise ConnectionError(self.message)


class BlindEmbedder:
    """Sees no meaning at all: each text gets a fixed pseudo-random vector, so
    every pair, even a near-verbatim restatement, scores far under a floor.
    The safe failure: semantic retrieval finds nothing and lexical carries on."""

    model_id = "test-blind-embedder"

    def embed(self, texts):
        rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=32) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 32)
