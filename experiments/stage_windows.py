"""Would the second model order candidates better if it read a passage by its
sentence windows as well as whole?

An exploratory probe on a pair set (`tests/data/knowledge/stage_pairs.json`,
exported from the tuning half of the retrieval evaluation): every passage of
the set is embedded whole and as overlapping windows of `sentences`
sentences (its heading trail in front of each); each scene scores every
passage by the whole passage's cosine, by its best window's, or by their
mean. For each score: how often the scene's own passage is first and within
the first three among the set's passages, and how well it separates from
the best passage of each everyday scene (AUC). Nothing here is shipped: a
stored window vector per few sentences would multiply the second stage's
background work and storage, so this says whether that is worth building.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["MODES", "windows", "probe"]

MODES = ("passage", "window", "mean")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
# A fragment shorter than this ("Ch. 4.", "Yes.") joins no window on its own.
MIN_SENTENCE_CHARS = 20


def windows(heading: str, text: str, sentences: int = 2) -> list[str]:
    """The passage as overlapping runs of `sentences` sentences, each under its heading trail."""
    parts = [s.strip() for s in _SENTENCE_END.split(text) if len(s.strip()) >= MIN_SENTENCE_CHARS]
    runs = [" ".join(parts[i:i + sentences]) for i in range(max(1, len(parts) - sentences + 1))] if parts else [text]
    return [f"{heading}\n{run}".strip() for run in runs]


def _unit(vectors) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def probe(pairs_path: str | Path, embedder, sentences: int = 2) -> pd.DataFrame:
    """One row per score (MODES): top-1 and top-3 share of the targeted scenes,
    AUC of their own passage's score against each everyday scene's best."""
    from sklearn.metrics import roc_auc_score

    pairs = json.loads(Path(pairs_path).read_text(encoding="utf-8"))
    keys = list(pairs["passages"])
    texts = [(pairs["passages"][k].get("heading", "") + "\n" + pairs["passages"][k]["text"]).strip() for k in keys]
    spans, owner = [], []
    for index, key in enumerate(keys):
        passage = pairs["passages"][key]
        made = windows(passage.get("heading", ""), passage["text"], sentences)
        spans += made
        owner += [index] * len(made)
    owner = np.asarray(owner)
    whole, parts = _unit(embedder.embed(texts)), _unit(embedder.embed(spans))
    targeted = pairs["targeted"]
    own = np.asarray([keys.index(t["passage"]) for t in targeted])
    scene_vectors = _unit(embedder.embed([t["query"] for t in targeted]))
    everyday_vectors = _unit(embedder.embed(list(pairs["off_topic"])))

    def scores(queries: np.ndarray) -> dict[str, np.ndarray]:
        passage = queries @ whole.T
        by_window = queries @ parts.T
        best = np.stack([by_window[:, owner == j].max(axis=1) for j in range(len(keys))], axis=1)
        return {"passage": passage, "window": best, "mean": (passage + best) / 2}

    scenes, days = scores(scene_vectors), scores(everyday_vectors)
    rows = []
    for mode in MODES:
        scored, everyday = scenes[mode], days[mode].max(axis=1)
        mine = scored[np.arange(len(targeted)), own]
        above = (scored > mine[:, None]).sum(axis=1)
        labels = [1] * len(mine) + [0] * len(everyday)
        rows.append({"score": mode, "scenes": len(targeted), "everyday": len(everyday),
                     "first": float((above == 0).mean()), "within_three": float((above < 3).mean()),
                     "auc": float(roc_auc_score(labels, [*mine, *everyday])),
                     "own_median": float(np.median(mine)), "everyday_best_max": float(everyday.max()),
                     "passages": len(keys), "windows": len(spans)})
    return pd.DataFrame(rows)
