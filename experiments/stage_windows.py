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

`held_out` asks the same question the way the engine's constants are chosen:
on the retrieval evaluation's halves, the fused score refitted and its floor,
cut and cap chosen on the tuning half with the window score in place of the
whole passage's, and the other half reported.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from engine.vectors import as_query

__all__ = ["ARMS", "MODES", "compare_arms", "held_out", "probe", "window_scores", "windows"]

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
    ask = as_query(embedder)  # scenes are queries: the query prompt where the model has one
    scene_vectors = _unit(ask([t["query"] for t in targeted]))
    everyday_vectors = _unit(ask(list(pairs["off_topic"])))

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


# The second model's score each arm gives the fused model: the whole
# passage's cosine (what the engine ships), the mean of it and the best
# window's, or the best window's alone.
ARMS = {"whole": "second", "mean of whole and best window": "windowed", "best window": "window"}


def window_scores(table: pd.DataFrame, queries: dict, spans: dict[int, list[str]], embedder,
                  progress: bool = False) -> pd.DataFrame:
    """The candidates of `table` (a fusion table) that the second model
    scored, each with its best window's cosine to the scene's query vectors
    (`queries`: scene id -> unit vectors of its parts) as "window", and the
    mean of that and the whole passage's as "windowed"."""
    scored = table[table.second.notna()].copy()
    wanted = sorted({int(p) for p in scored.passage_id})
    texts, owner = [], []
    for pid in wanted:
        texts += spans[pid]
        owner += [pid] * len(spans[pid])
    from tqdm.auto import tqdm

    step = 256
    chunks = [embedder.embed(texts[i:i + step]) for i in tqdm(range(0, len(texts), step), desc="windows",
                                                              disable=not progress, leave=False)]
    vectors, owner = _unit(np.concatenate(chunks)), np.asarray(owner)
    rows = {pid: np.flatnonzero(owner == pid) for pid in wanted}
    scored["window"] = [float((queries[sid] @ vectors[rows[int(pid)]].T).max())
                        for sid, pid in zip(scored.id, scored.passage_id, strict=True)]
    scored["windowed"] = (scored.second + scored.window) / 2
    return scored


def compare_arms(tune: pd.DataFrame, held: pd.DataFrame, knowledge_at: dict[int, int],
                 paraphrase: set[str] = frozenset(), per_path: int = 10) -> pd.DataFrame:
    """One row per arm (ARMS): the fused model fitted on `tune`, its floor,
    cut and cap chosen there (`retrieval_eval.choose`: at most one everyday
    scene admitting at the smallest window, then hits, then precision), and
    the held-out hits, precision, everyday scenes admitting and paraphrase
    hits at each window, with how often a relevant passage is first."""
    from . import retrieval_eval as ev

    paths = {f"{per_path} per path": {"per_path": per_path, "scan": 0}}
    smallest = min(knowledge_at)
    out = []
    for arm, column in ARMS.items():
        t, h = tune.assign(second=tune[column]), held.assign(second=held[column])
        coefficients = ev.fit_fusion(t)
        st, sh = ev.fused(t, coefficients), ev.fused(h, coefficients)
        sweep = ev.fusion_sweep(t, st, ev.fusion_floors(t, st), cuts=(0.5, 0.7, 0.8, 0.9), caps=(1, 2, 3),
                                paths=paths, knowledge_tokens=knowledge_at,
                                paraphrase=sorted(paraphrase & set(t.id)))
        chosen = ev.choose(sweep, window=smallest)
        report = ev.fusion_sweep(h, sh, [chosen["floor"]], [chosen["cut"]], [int(chosen["cap"])], paths=paths,
                                 knowledge_tokens=knowledge_at, paraphrase=sorted(paraphrase & set(h.id))).iloc[0]
        targeted = h.assign(f=sh.to_numpy())[h.kind == "targeted"].sort_values(  # a tie is not a win
            ["f", "relevant"], ascending=[False, True], kind="stable")
        row = {"arm": arm, "floor": chosen["floor"], "cut": chosen["cut"], "cap": int(chosen["cap"]),
               f"tuning_hits_{smallest}": int(chosen[f"hits_{smallest}"]),
               "held_targeted": targeted.id.nunique(),
               "held_relevant_first": int(targeted.groupby("id").head(1).relevant.sum())}
        for w in knowledge_at:
            row.update({f"held_hits_{w}": int(report[f"hits_{w}"]), f"held_precision_{w}": report[f"precision_{w}"],
                        f"held_everyday_admitting_{w}": int(report[f"off_topic_{w}"])})
            if paraphrase & set(h.id):
                row[f"held_paraphrase_hits_{w}"] = int(report[f"paraphrase_hits_{w}"])
        out.append(row)
    return pd.DataFrame(out).set_index("arm")


def held_out(camp, labels, *, sentences: int = 2, windows_at=(4096, 16384), progress: bool = True) -> pd.DataFrame:
    """`compare_arms` on the retrieval evaluation's halves, in `camp` (an
    `retrieval_eval.open_library` campaign behind the embedded MiniLM, second
    stage on): second-stage vectors for each path's candidates, the fusion
    tables of both halves, every scored candidate's windows embedded through
    the evaluation's on-disk cache. About an hour the first time on a 2-core
    machine (most of it all-mpnet-base-v2 over ~2,000 passages and ~12,000
    windows), minutes after."""
    from engine.search.query import query_parts

    from . import retrieval_eval as ev

    tuning, held = ev.split(labels)
    ev.compute_stage_vectors(camp, labels, progress=progress)
    knowledge_at = ev.knowledge_tokens(camp, windows_at)
    passages = ev.passages_of(camp)
    stage = ev.second_stage_of(camp)
    embedder = stage.embedder if isinstance(stage.embedder, ev.CachedEmbedder) else ev.CachedEmbedder(stage.embedder)
    queries = {scene["id"]: _unit(as_query(embedder)(query_parts(query)[:ev.tuning_of(camp).stage_parts]))
               for _, scene, query, _ in ev.first_stage(camp, labels, "queries", progress)}
    spans = {pid: windows(heading, text, sentences) for pid, (_, heading, text) in passages.items()}
    tables = [window_scores(ev.fusion_table(camp, half, progress=progress), queries, spans, embedder, progress)
              for half in (tuning, held)]
    return compare_arms(*tables, knowledge_at, set(ev.paraphrases(labels, passages)))
