"""Does retrieval put the right passages of real books in front of the narrator?

A labelled set (tests/data/knowledge/retrieval_labels.json) names, for each
targeted scene, the document and the headings or phrases that make a passage
relevant, and lists everyday off-topic scenes that share words with the
library. Each scene goes through the production path, `camp.context(scene)`
(the dry run of the next turn: the same retrieval, budget and builder a turn
uses), at each window; what reached the prompt is judged against the labels.

    labels = load_labels()
    camp = open_library(workdir / "eval.db", labels)
    frame = evaluate(camp, labels, windows=(4096, 16384))
    summarise(frame)

Issue 25 adds the second stage and held-out reporting: `split` halves the
scenes (every constant is chosen on the tuning half, `fusion_table` and
`fusion_sweep`, and reported on the other), `evaluate(..., stages=("off", "auto"))` asks every
scene with the first stage alone and with the second, and `paraphrases`
says which scenes share no content word with their passage. Passage vectors
of both models are cached on disk (`CachedEmbedder`, keyed by model and
text), so a rerun embeds nothing it has embedded before.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sqlalchemy import select
from tqdm.auto import tqdm

from engine import Workbench, search
from engine.context import tokens
from engine.errors import NotAllowed
from engine.knowledge import scene_query, stage_for
from engine.knowledge.allotment import CLASS_SHARE, FILL_ORDER, passage_cost
from engine.knowledge.chunking import chunk
from engine.knowledge.framing import CLASS_HEADERS, SEPARATOR, block
from engine.providers.embedders import MiniLMEmbedder
from engine.search import DEFAULT, Fusion, Retrieved, index_line, lexical, reads, stage_vectors
from engine.search.admission import lexical_evidence
from engine.search.classes import CLASS_WEIGHTS, REFERENCE
from engine.search.fusion import relevance
from engine.search.query import query_parts
from engine.search.second_stage import evidence_feature
from engine.search.vectors import cache_key, load_matrix, unit
from engine.store.knowledge_tables import KnowledgePassageRow
from engine.turns.inputs import player_line
from engine.vectors import as_query

__all__ = [
    "DATA_DIR",
    "LABELS_FILE",
    "CachedEmbedder",
    "Labels",
    "Signals",
    "TARGETS",
    "choose",
    "chosen_tuning",
    "plain_sweep",
    "compute_stage_vectors",
    "held_out_table",
    "paraphrases",
    "split",
    "stage_sweep",
    "admission_sweep",
    "admitted_irrelevant",
    "against_targets",
    "candidates",
    "causes",
    "diagnose",
    "evaluate",
    "export_pairs",
    "is_relevant",
    "load_labels",
    "open_library",
    "passage_sizes",
    "per_document",
    "plot_ranks",
    "plot_sizes",
    "plot_windows",
    "rank_table",
    "reach",
    "reference_cap",
    "signals",
    "summarise",
]

DATA_DIR = Path(__file__).parents[1] / "tests" / "data" / "knowledge"
LABELS_FILE = DATA_DIR / "retrieval_labels.json"
# What issue 16 asks of the embedded MiniLM, per window: targeted scenes
# with a relevant passage, precision of what they admitted, and at most one
# off-topic scene (of 40) admitting anything.
TARGETS = {4096: {"hit_rate": 0.85, "precision": 0.80, "off_topic_admitting": 1, "paraphrase_rate": 0.70},
           16384: {"hit_rate": 0.90, "precision": 0.80, "off_topic_admitting": 1}}
_HEADING_LINE = re.compile(r"^#{1,6}\s+(.*)$", re.MULTILINE)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Labels:
    """The documents of the library and the scenes judged against them."""

    name: str
    sha256: str
    documents: dict[str, dict]  # key -> {"file", "class", "kind"}
    targeted: tuple[dict, ...]  # {"id", "document", "scene", "headings", "phrases"}
    off_topic: tuple[str, ...]
    story: tuple[str, ...] = ()  # played before every scene in the "in play" run

    def only(self, documents: Iterable[str] | None = None, *, targeted_per_document: int | None = None,
             off_topic: int | None = None) -> Labels:
        """A smaller set for a quick run: some documents, the first scenes of each."""
        keys = list(documents) if documents else list(self.documents)
        unknown = sorted(set(keys) - set(self.documents))
        if unknown:
            raise ValueError(f"Unknown document(s) {unknown}; the labels have {sorted(self.documents)}.")
        picked: list[dict] = []
        for key in keys:
            mine = [t for t in self.targeted if t["document"] == key]
            picked += mine[:targeted_per_document] if targeted_per_document else mine
        return replace(self, documents={k: self.documents[k] for k in keys}, targeted=tuple(picked),
                       off_topic=self.off_topic[:off_topic] if off_topic else self.off_topic)


def load_labels(path: str | Path | None = None) -> Labels:
    raw = Path(path or LABELS_FILE).read_bytes()
    data = json.loads(raw)
    return Labels(data["name"], hashlib.sha256(raw).hexdigest(), data["documents"], tuple(data["targeted"]),
                  tuple(data["off_topic"]), tuple(data.get("story_before", ())))


def _norm(text: str) -> str:
    return _SPACES.sub(" ", text).strip().lower()


def is_relevant(scene: dict, document_file: str, heading: str, text: str, documents: dict[str, dict]) -> bool:
    """A passage is relevant to a targeted scene when it comes from the
    scene's document and either a labelled heading is one of its headings (a
    whole component of its trail, or a heading line written into its text)
    or a labelled phrase is in its text."""
    if documents[scene["document"]]["file"] != document_file:
        return False
    names = {_norm(h) for h in heading.split(" > ") if h} | {_norm(h) for h in _HEADING_LINE.findall(text)}
    names |= {_norm(part) for h in _HEADING_LINE.findall(text) for part in h.split(" > ")}
    if any(_norm(h) in names for h in scene.get("headings", ())):
        return True
    body = _norm(text)
    return any(_norm(p) in body for p in scene.get("phrases", ()))


# ---------------------------------------------------------------- halves and paraphrases
def split(labels: Labels) -> tuple[Labels, Labels]:
    """(tuning, held-out): within each document, and among the everyday
    scenes, alternate scenes in label order go to each half, so both halves
    hold every document, old scenes and new ones. Constants are chosen on the
    first and reported on the second."""
    tuning, held = [], []
    for key in labels.documents:
        mine = [t for t in labels.targeted if t["document"] == key]
        tuning += mine[0::2]
        held += mine[1::2]
    return (replace(labels, targeted=tuple(tuning), off_topic=labels.off_topic[0::2]),
            replace(labels, targeted=tuple(held), off_topic=labels.off_topic[1::2]))


def _stems(text: str) -> set[str]:

    return {w for w in search.stems(search.terms(text)) if len(w) >= 3}


def paraphrases(labels: Labels, passages: dict[int, tuple[str, str, str]] | None = None) -> list[str]:
    """Ids of targeted scenes that share no content word (stop words aside,
    Porter-stemmed, as the lexical index reads them) with any passage
    relevant to them: only meaning can find their passage. `passages` is
    {id: (file, heading, text)} (`passages_of`); without it the documents are
    chunked here."""
    if passages is None:

        passages, n = {}, 0
        for doc in labels.documents.values():
            text = (DATA_DIR / doc["file"]).read_text(encoding="utf-8-sig")
            for p in chunk(text, markdown=doc["file"].endswith(".md")):
                passages[n] = (doc["file"], p.heading, p.text)
                n += 1
    out = []
    for scene in labels.targeted:
        relevant = [p for p in passages.values() if is_relevant(scene, *p, labels.documents)]
        words = _stems(scene["scene"])
        if relevant and not any(words & _stems(f"{h}\n{t}") for _, h, t in relevant):
            out.append(scene["id"])
    return out


# ---------------------------------------------------------------- vector cache
def _cache_path() -> Path:
    given = os.environ.get("STORY_WORKBENCH_EVAL_VECTORS")
    return Path(given) if given else Path.home() / ".cache" / "story-workbench" / "eval-vectors.sqlite"


class CachedEmbedder:
    """An embedder whose vectors are kept on disk, keyed by model and the
    text's sha256: the evaluation's libraries are the same public documents
    run after run, and all-mpnet-base-v2 embeds about one passage a second on
    a busy 2-core machine. Same model id as the embedder it wraps, so the
    engine stores and compares its vectors as that model's."""

    def __init__(self, inner, path: str | Path | None = None):
        self.inner = inner
        self.model_id = inner.model_id
        self.path = Path(path) if path else _cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._lock, sqlite3.connect(self.path, timeout=60) as c:
            c.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vector BLOB, "
                      "PRIMARY KEY (model, hash))")

    def _held(self, keys: list[str]) -> dict[str, np.ndarray]:
        held: dict[str, np.ndarray] = {}
        with self._lock, sqlite3.connect(self.path, timeout=60) as c:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for digest, blob in c.execute(f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({marks})",
                                              [self.model_id, *chunk]):
                    held[digest] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return held

    def missing(self, texts: Sequence[str]) -> int:
        """How many of `texts` are not cached yet."""
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        return len(set(keys) - set(self._held(keys)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self.inner.embed, "")

    def __getattr__(self, name: str):
        # a model with a query prompt (EmbeddingGemma) offers embed_query:
        # its vectors are cached apart from the same text's document vector
        if name == "embed_query" and hasattr(self.inner, "embed_query"):
            return lambda texts: self._embed(texts, self.inner.embed_query, "query:")
        raise AttributeError(name)

    def _embed(self, texts: Sequence[str], run, kind: str) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [hashlib.sha256((kind + t).encode("utf-8")).hexdigest() for t in texts]
        held = self._held(keys)
        todo = [i for i, k in enumerate(keys) if k not in held]
        if todo:
            fresh = np.asarray(run([texts[i] for i in todo]), dtype=np.float32)
            with self._lock, sqlite3.connect(self.path, timeout=60) as c:
                c.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                              [(self.model_id, keys[i], np.asarray(v, dtype="<f4").tobytes())
                               for i, v in zip(todo, fresh, strict=True)])
            held.update((keys[i], v) for i, v in zip(todo, fresh, strict=True))
        return np.stack([held[k] for k in keys])


# ---------------------------------------------------------------- library
def open_library(path: str | Path, labels: Labels, *, embedder: str = "local", progress: bool = True,
                 in_play: bool = False, second_stage: str = "auto", relevance_model: str = ""):
    """A fresh workbench file holding one campaign whose library is the
    labels' documents, imported and embedded the way a reader would.

    `relevance_model`: the second stage's model ("" = the setting's default).
    `in_play`: the campaign's story is the labels' `story` (imported as an AI
    Dungeon adventure, the way a reader brings a story in), so every scene
    asked of it comes after those turns, as the newest input of a turn."""

    path = Path(path)
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    wb = Workbench.open(path, background=False)
    wb.configure(narrator="local", embedder=embedder, second_stage=second_stage)
    if relevance_model:  # "" follows what is installed, as a reader's workbench does
        wb.configure(relevance_model=relevance_model)
    if embedder == "local":  # the same MiniLM, its passage vectors read from the on-disk cache

        wb.configure(embedder=CachedEmbedder(MiniLMEmbedder()))
    if in_play:
        if not labels.story:
            raise ValueError("These labels have no story_before to play the scenes after.")
        report = wb.import_ai_dungeon({"title": labels.name, "prompt": labels.story[0],
                                       "actions": [{"type": "continue", "text": t} for t in labels.story[1:]]})
        camp = wb.campaign(report.campaign_id)
    else:
        camp = wb.new_campaign(labels.name, premise="A retrieval evaluation on public documents.",
                               protagonist="Aldric")
    stage = second_stage_of(camp)
    if stage is not None and stage.needs_vectors and not isinstance(stage.embedder, CachedEmbedder):
        stage.embedder = CachedEmbedder(stage.embedder)  # its query vectors too: the same scenes run after run
    library = camp.knowledge
    library.progress = progress
    for doc in labels.documents.values():
        library.add(DATA_DIR / doc["file"], classification=doc["class"], embed_now=0)
    library.embed_pending()  # all of it, before any scene is asked
    return camp


def tuning_of(camp) -> search.Tuning:
    """The search tuning the campaign's workbench runs with (what a turn uses)."""
    return camp.workbench.settings.tuning


def passages_of(camp) -> dict[int, tuple[str, str, str]]:
    """{passage id: (file, heading, text)} for every passage of the library."""
    library = camp.knowledge
    out = {}
    for source_id, row in library.list().iterrows():
        for p in library.passages(source_id).itertuples():
            out[int(p.passage_id)] = (row["file"], p.heading, p.text)
    return out


# ---------------------------------------------------------------- evaluating
def _window(camp, window: int) -> None:
    """Play as if the narrator's window (and the budget) were `window` tokens."""
    camp.workbench.configure(n_ctx=window, context_budget=window)


def second_stage_of(camp):
    """The second stage the campaign's settings choose (None: off)."""

    embedder = camp.workbench.embedder_or_none()
    return stage_for(camp.workbench.settings, getattr(embedder, "model_id", None))


def first_stage(camp, labels: Labels, desc: str, progress: bool):
    """(kind, scene, query, the first stage's search) for every scene, asked in
    this campaign with the second stage off (what the tables and the vector
    pass start from), the campaign's own setting put back afterwards."""

    db, embedder = camp.knowledge.db, camp.workbench.embedder_or_none()
    saved = camp.workbench.settings.second_stage
    camp.workbench.configure(second_stage="off")  # asking is first-stage work only
    try:
        for kind, scene in tqdm(_scenes(labels), desc=desc, disable=not progress, leave=False):
            query = _asked(camp, scene["scene"])
            yield kind, scene, query, search.find(db, camp.id, query, embedder=embedder, tuning=tuning_of(camp))
    finally:
        camp.workbench.configure(second_stage=saved)


def compute_stage_vectors(camp, labels: Labels, *, progress: bool = True, every: bool = False) -> dict:
    """Second-stage vectors for the passages any scene's second stage will
    judge (each path's best `stage_candidates` for every scene, as the scene
    is asked), through the on-disk cache; with `every`, for the whole
    library, as the engine's background pass does. A turn reads only its
    candidates' vectors, so for these scenes the two are the same; the
    candidates alone are a fraction of the embedding."""

    stage = second_stage_of(camp)
    if stage is None or not stage.needs_vectors:
        return {"model": getattr(stage, "model_id", ""), "embedded": 0, "passages": 0}
    cached = CachedEmbedder(stage.embedder)
    db = camp.knowledge.db
    if every:
        done = stage_vectors.catch_up(db, camp.id, cached, progress=progress)
        return {"model": stage.model_id, "embedded": done.embedded, "passages": done.embedded + done.remaining}
    wanted: dict[int, None] = {}
    for *_, found in first_stage(camp, labels, "candidates", progress):
        wanted.update((pid, None) for pid in found.candidates(tuning_of(camp).stage_candidates))
    passages = passages_of(camp)
    with db.reading() as s:
        hashes = dict(s.execute(text_sql(list(wanted))).all()) if wanted else {}
    rows = [(hashes[pid], index_line(passages[pid][1], passages[pid][2])) for pid in wanted if pid in hashes]
    with db.reading() as s:
        held = stage_vectors.vectors_for(s, stage.model_id, [h for h, _ in rows])
    rows = [r for r in rows if r[0] not in held]
    for start in tqdm(range(0, len(rows), stage_vectors.BATCH), desc="second-stage vectors", disable=not progress,
                      leave=False):
        batch = rows[start:start + stage_vectors.BATCH]
        stage_vectors.store_vectors(db, stage.model_id, batch, cached.embed([line for _, line in batch]))
    return {"model": stage.model_id, "embedded": len(rows), "passages": len(wanted)}


def text_sql(ids: Sequence[int]):


    return select(KnowledgePassageRow.id, KnowledgePassageRow.content_hash).where(KnowledgePassageRow.id.in_(ids))


def _asked(camp, scene: str) -> str:
    """The query a turn with this scene as its input searches with, in this
    campaign (its story before the scene included): the one the dry run's
    knowledge report names."""
    return (camp.context(scene)["knowledge"] or {}).get("query", "")


def _judge(kind: str, scene: dict, used: Sequence[dict], passages, documents) -> dict:
    relevant = [u for u in used
                if kind == "targeted" and is_relevant(scene, *passages[u["passage_id"]], documents)]
    return {
        "admitted": len(used), "relevant": len(relevant), "hit": bool(relevant),
        "found_by": [u.get("found_by", "") for u in used],
        "headings": [u.get("heading", "") for u in used],
        "files": [u.get("filename", "") for u in used],
        "relevant_found_by": [u.get("found_by", "") for u in relevant],
        "is_relevant": [any(u is r for r in relevant) for u in used],
    }


def _scenes(labels: Labels) -> list[tuple[str, dict]]:
    """(kind, scene) for every scene: the targeted ones, then the off-topic
    ones as scenes of no document."""
    return [("targeted", t) for t in labels.targeted] + [
        ("off_topic", {"id": f"off-{i + 1:02d}", "document": "", "scene": s}) for i, s in enumerate(labels.off_topic)]


def evaluate(camp, labels: Labels, windows: Sequence[int] = (4096, 16384), *, progress: bool = True,
             stages: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (stage, window, scene): what the prompt carried and how
    much of it was relevant. `stages` are second_stage settings to ask each
    scene under ("off": the first stage alone; "auto": with the second);
    None keeps the campaign's own setting. The column `second_used` says
    whether the second stage judged that scene."""
    passages = passages_of(camp)
    scenes = _scenes(labels)
    rows = []
    wb = camp.workbench
    saved = wb.settings.second_stage
    try:
        for stage in stages or [saved]:
            wb.configure(second_stage=stage)
            for window in windows:
                _window(camp, int(window))
                for kind, scene in tqdm(scenes, desc=f"{stage} at {window}", disable=not progress, leave=False):
                    report = camp.context(scene["scene"])
                    knowledge = report["knowledge"] or {}
                    used = knowledge.get("used", [])
                    rows.append({"stage": stage, "window": int(window), "kind": kind, "id": scene["id"],
                                 "document": scene["document"], "scene": scene["scene"],
                                 "dropped": len(knowledge.get("dropped", [])),
                                 "knowledge_tokens": knowledge.get("budget", {}).get("knowledge_tokens", 0),
                                 "second_used": bool(knowledge.get("second_stage_used")),
                                 **_judge(kind, scene, used, passages, labels.documents)})
    finally:
        wb.configure(second_stage=saved)
    return pd.DataFrame(rows)


def summarise(frame: pd.DataFrame, paraphrase: Sequence[str] = ()) -> dict[int, dict]:
    """Per window: targeted scenes with a relevant passage in the prompt, the
    precision of what targeted scenes admitted, and off-topic scenes that
    admitted anything (every such passage is irrelevant by construction);
    with `paraphrase` ids, the hits among those scenes too. One stage's
    rows at a time (see `held_out_table` for several)."""
    out = {}
    for window, rows in frame.groupby("window"):
        targeted, off = rows[rows.kind == "targeted"], rows[rows.kind == "off_topic"]
        admitted = int(targeted.admitted.sum())
        out[int(window)] = {
            "targeted": len(targeted), "targeted_hits": int(targeted.hit.sum()),
            "hit_rate": round(float(targeted.hit.mean()), 4) if len(targeted) else 0.0,
            "admitted": admitted, "admitted_relevant": int(targeted.relevant.sum()),
            "precision": round(float(targeted.relevant.sum() / admitted), 4) if admitted else 1.0,
            "off_topic": len(off), "off_topic_admitting": int((off.admitted > 0).sum()),
            "off_topic_passages": int(off.admitted.sum()),
            "knowledge_tokens": int(rows.knowledge_tokens.median()) if len(rows) else 0,
        }
        if paraphrase:
            para = targeted[targeted.id.isin(list(paraphrase))]
            out[int(window)].update(paraphrase=len(para), paraphrase_hits=int(para.hit.sum()),
                                    paraphrase_rate=round(float(para.hit.mean()), 4) if len(para) else 0.0)
        if "second_used" in rows:
            out[int(window)]["second_used"] = int(rows.second_used.sum())
    return out


def held_out_table(frame: pd.DataFrame, paraphrase: Sequence[str] = ()) -> pd.DataFrame:
    """The figures of each (stage, window), side by side: one row each."""
    rows = []
    for stage, part in frame.groupby("stage", sort=False):
        for window, s in summarise(part, paraphrase).items():
            rows.append({"stage": "first stage alone" if stage == "off" else f"with second stage ({stage})",
                         "window": window, **s})
    return pd.DataFrame(rows).set_index(["stage", "window"])


def against_targets(summary: dict[int, dict]) -> dict[str, dict]:
    """Each window's figures beside the targets (issues 16 and 25), and
    whether each is met. Everyday admissions are allowed in proportion: one
    in 40 everyday scenes."""
    out = {}
    for window, s in summary.items():
        goal = TARGETS.get(int(window))
        if goal is None:
            continue
        allowed = goal["off_topic_admitting"] * max(1, round(s.get("off_topic", 40) / 40))
        row = {
            "hit_rate": s["hit_rate"], "hit_rate_target": goal["hit_rate"],
            "precision": s["precision"], "precision_target": goal["precision"],
            "off_topic_admitting": s["off_topic_admitting"], "off_topic_target": allowed,
            "met": bool(s["hit_rate"] >= goal["hit_rate"] and s["precision"] >= goal["precision"]
                        and s["off_topic_admitting"] <= allowed),
        }
        if "paraphrase_rate" in goal and "paraphrase_rate" in s:
            row.update(paraphrase_rate=s["paraphrase_rate"], paraphrase_target=goal["paraphrase_rate"])
            row["met"] = row["met"] and s["paraphrase_rate"] >= goal["paraphrase_rate"]
        out[str(window)] = row
    return out


def per_document(frame: pd.DataFrame, labels: Labels) -> pd.DataFrame:
    """Hit rate and precision per window and per document (its class and kind)."""
    targeted = frame[frame.kind == "targeted"]
    grouped = targeted.groupby(["window", "document"]).agg(
        scenes=("id", "count"), hits=("hit", "sum"), admitted=("admitted", "sum"), relevant=("relevant", "sum"))
    grouped["hit_rate"] = (grouped.hits / grouped.scenes).round(3)
    grouped["precision"] = (grouped.relevant / grouped.admitted.where(grouped.admitted > 0)).round(3)
    docs = labels.documents
    grouped["class"] = [docs[d]["class"] for _, d in grouped.index]
    grouped["kind"] = [docs[d].get("kind", "") for _, d in grouped.index]
    return grouped


# ---------------------------------------------------------------- admission sweep
def candidates(camp, labels: Labels) -> pd.DataFrame:
    """Every candidate each scene's search produced, before admission: its
    lexical evidence, the scene's own lexical weight, its cosine, and whether
    it is relevant. What the admission constants are chosen on; it runs the
    engine's own search step (`engine.search.find`), nothing re-implemented."""

    passages, embedder, db = passages_of(camp), camp.workbench.embedder_or_none(), camp.knowledge.db
    scenes = _scenes(labels)
    rows = []
    for kind, scene in scenes:
        found = search.find(db, camp.id, _query(scene["scene"]), embedder=embedder, tuning=tuning_of(camp))
        cosines = dict(found.sem.hits)
        for pid in set(cosines) | {p for p, _ in found.lexical}:
            rows.append({"kind": kind, "id": scene["id"], "passage_id": pid,
                         "relevant": kind == "targeted" and is_relevant(scene, *passages[pid], labels.documents),
                         "evidence": found.strength.get(pid, 0.0), "query_weight": found.weights.query,
                         "cosine": cosines.get(pid, 0.0)})
    return pd.DataFrame(rows)


def admission_sweep(table: pd.DataFrame, shares: Sequence[float] = (0.3, 0.45, 0.6, 0.75),
                    caps: Sequence[float] = (12, 14, 18), floors: Sequence[float] = (0.40, 0.44, 0.48),
                    shown: dict[int, int] | None = None) -> pd.DataFrame:
    """Hit rate, precision and everyday scenes admitting anything for other
    admission constants, on `candidates`. The budget is stood in for by the
    `shown` best passages per scene ({4096: 2, 16384: 8}: about what fits),
    after the same ranking and relative cut as the engine's."""

    shown = shown or {4096: 2, 16384: 8}
    n_targeted = table[table.kind == "targeted"].id.nunique()
    rows = []
    for share, cap, floor in ((a, b, c) for a in shares for b in caps for c in floors):
        bar = (share * table.query_weight).clip(lower=DEFAULT.lexical_min_evidence, upper=cap)
        admitted = table[((table.evidence > 0) & (table.evidence >= bar)) | (table.cosine >= floor)]
        scored = admitted.assign(score=DEFAULT.evidence_scale * admitted.evidence + admitted.cosine)
        scored = scored[scored.score >= DEFAULT.relative_cut * scored.groupby("id").score.transform("max")]
        row = {"share": share, "cap": cap, "floor": floor}
        for window, k in shown.items():
            top = scored.sort_values(["id", "score"], ascending=[True, False]).groupby("id").head(k)
            targeted = top[top.kind == "targeted"]
            row[f"hits_{window}"] = int(targeted.groupby("id").relevant.any().sum())
            row[f"hit_rate_{window}"] = round(row[f"hits_{window}"] / max(n_targeted, 1), 3)
            row[f"precision_{window}"] = round(float(targeted.relevant.mean()), 3) if len(targeted) else 1.0
            row[f"off_topic_{window}"] = int(top[top.kind == "off_topic"].id.nunique())
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- second-stage constants
def stage_sweep(table: pd.DataFrame, floors: Sequence[float], cuts: Sequence[float] = (0.8, 0.9, 0.95),
                scales: Sequence[float] = (0.0, 0.01), per_path: Sequence[int] = (10, 20),
                shown: dict[int, int] | None = None) -> pd.DataFrame:
    """Hits, precision and everyday scenes admitting anything for each
    second-stage floor, relative cut, evidence scale and candidates per path,
    on a table of candidates with their plain second-stage score (the columns
    `fusion_table` gives, before the fused score replaced this sweep in the
    notebook): admitted at the floor, ordered by score (times the
    class weight), cut under `cut` of the best, the `shown` best standing in
    for the budget ({4096: 2, 16384: 8}, as in `admission_sweep`)."""
    shown = shown or {4096: 2, 16384: 8}
    scored = table[table.second.notna()]
    n_targeted = table[table.kind == "targeted"].id.nunique()
    rows = []
    for n in per_path:
        pool = scored[(scored.lex_rank.fillna(99) <= n) | (scored.sem_rank.fillna(99) <= n)]
        for floor, cut, scale in ((f, c, x) for f in floors for c in cuts for x in scales):
            admitted = pool[pool.second >= floor]
            relevance = admitted.second + scale * admitted.evidence
            admitted = admitted.assign(relevance=relevance, score=relevance * admitted.weight)
            admitted = admitted[admitted.relevance >= cut * admitted.groupby("id").relevance.transform("max")]
            row = {"per_path": n, "floor": floor, "cut": cut, "scale": scale}
            for window, k in shown.items():
                top = admitted.sort_values(["id", "score"], ascending=[True, False]).groupby("id").head(k)
                targeted = top[top.kind == "targeted"]
                row[f"hits_{window}"] = int(targeted.groupby("id").relevant.any().sum())
                row[f"hit_rate_{window}"] = round(row[f"hits_{window}"] / max(n_targeted, 1), 3)
                row[f"precision_{window}"] = round(float(targeted.relevant.mean()), 3) if len(targeted) else 1.0
                row[f"off_topic_{window}"] = int(top[top.kind == "off_topic"].id.nunique())
            rows.append(row)
    return pd.DataFrame(rows)


def choose(sweep: pd.DataFrame, window: int = 4096, off_topic: int = 1) -> pd.Series:
    """The row of a sweep a constant is taken from: everyday scenes admitting
    at most `off_topic`, then the most hits, then the fewest everyday scenes
    admitting, then the best precision."""
    ok = sweep[sweep[f"off_topic_{window}"] <= off_topic]
    ok = ok if len(ok) else sweep
    return ok.sort_values([f"hits_{window}", f"off_topic_{window}", f"precision_{window}"],
                          ascending=[False, True, False], kind="stable").iloc[0]


# ---------------------------------------------------------------- failure analysis
def _semantic_ranks(camp, query: str) -> dict[int, tuple[int, float]]:
    """{passage id: (rank, cosine)} of every embedded passage for `query`, by
    the library's own stored vectors (rank 1 is the nearest)."""
    ranked = _neighbours(camp, [query], 10**9)[0]
    return {pid: (i + 1, cos) for i, (pid, cos) in enumerate(ranked)}


def _lexical_of(camp, words: Sequence[str], ids: Sequence[int], found,
                heads: dict[int, str] | None = None) -> dict[int, tuple[float, tuple[str, ...]]]:
    """{passage id: (rarity-weighted evidence, words its heading names)} for
    passages whether or not they reached the lexical pool, by the engine's
    own evidence functions (what they would have scored as candidates).
    `heads` reuses headings already read."""

    library = camp.knowledge
    with library.db.reading() as s:
        live = reads.live_passage_ids(s, found.library.live)
        lists = [ids_ & live for ids_ in lexical.postings(s, words)]
        matched = lexical.evidence(s, list(words), list(ids), lists)
        heads = reads.headings(s, camp.id, ids) if heads is None else heads
    out = {}
    for pid in ids:
        named = lexical.in_heading(heads.get(pid, ""), words, matched.get(pid, ()))
        out[pid] = (lexical_evidence(matched.get(pid), found.weights, named), tuple(words[i] for i in sorted(named)))
    return out


def _cause(best: dict | None, second: dict | None = None) -> str:
    """Why the best-placed relevant passage of a missed scene did not reach
    the prompt: the first step of the production path it failed. `second`
    ({"floor", "per_path"}) when the second stage judged the scene."""
    if best is None:
        return "not in the library (no passage matches the label)"
    if second is not None and best["stage"] not in ("below_cut", "over_cap", "suppressed", "dropped", "admitted"):
        if best.get("second") is None:
            return f"not among the second stage's candidates (each path's best {second['per_path']})"
        return "second stage: scored under its floor"
    stage = {"below_cut": "admitted, then cut (under the relative cut of the best)",
             "over_cap": "admitted, then past the admitted-count cap",
             "suppressed": "admitted, then suppressed as a near-repeat",
             "dropped": "admitted, then did not fit the budget",
             "admitted": "admitted, not shown"}.get(best["stage"])
    if stage:
        return stage

    sem, lex = best["sem_rank"] is not None and best["sem_rank"] <= DEFAULT.semantic_candidates, best["lex_candidate"]
    if sem and lex:
        return "candidate of both paths: cosine under the floor and evidence under the bar"
    if sem:
        return "semantic candidate only: cosine under the floor"
    if lex:
        return "lexical candidate only: evidence under the bar"
    if best["pool_rank"] is not None:
        return "in the bm25 pool, not among the 40 lexical candidates; semantic rank > 40"
    return "no candidate: no bm25 match in the pool and semantic rank > 40"


DIAGNOSIS_COLUMNS = ["id", "document", "hit", "scene", "cause", "second", "second_floor", "relevant_passages",
                     "best_stage", "sem_rank",
                     "cosine", "floor", "bm25_rank", "evidence", "required", "heading_names", "relevant_heading",
                     "used", "instead", "below_cut", "dropped", "terms"]


def diagnose(camp, labels: Labels, window: int, frame: pd.DataFrame | None = None, *,
             every: bool = False) -> pd.DataFrame:
    """One row per targeted scene that got nothing relevant at `window` (all
    scenes with `every`): where its relevant passages stood at each step of
    the production retrieval, why none reached the prompt, and what did.

    The prompt is the engine's own (`camp.context`, its knowledge report:
    used, below_cut, suppressed, dropped); the candidates and admission bar
    are the engine's search step (`engine.search.find`); the full semantic
    ranking is the library's stored vectors. `frame` (from `evaluate`)
    picks the scenes; without it every targeted scene is run."""

    passages, embedder, db = passages_of(camp), camp.workbench.embedder_or_none(), camp.knowledge.db
    stage = second_stage_of(camp)
    if frame is not None and "stage" in frame:
        frame = frame[frame.stage == camp.workbench.settings.second_stage]
    if frame is not None and not every:
        rows_ = frame[(frame.window == window) & (frame.kind == "targeted") & ~frame.hit]
        wanted = set(rows_.id)
        scenes = [t for t in labels.targeted if t["id"] in wanted]
    else:
        scenes = list(labels.targeted)
    _window(camp, int(window))
    out = []
    for scene in scenes:
        query = _query(scene["scene"])
        report = camp.context(scene["scene"])["knowledge"] or {}
        used = report.get("used", [])
        hit = any(is_relevant(scene, *passages[u["passage_id"]], labels.documents) for u in used if u["passage_id"] > 0)
        if hit and not every:
            continue
        found = search.find(db, camp.id, query, embedder=embedder, stage=stage, tuning=tuning_of(camp))
        second = found.second.scores if found.staged else {}
        relevant = [pid for pid in passages if is_relevant(scene, *passages[pid], labels.documents)]
        sem = _semantic_ranks(camp, query) if embedder is not None else {}
        lex = _lexical_of(camp, found.words, relevant, found) if relevant else {}
        lexical_ids = {pid for pid, _ in found.lexical}  # the 40 candidates, after the evidence re-sort
        bm25_rank = {pid: i + 1 for i, (pid, _) in enumerate(_pool(db, camp.id, found.words))}
        stage_of = {u["passage_id"]: "admitted" for u in used}
        stage_of.update({d["passage_id"]: "below_cut" for d in report.get("below_cut", [])})
        stage_of.update({d["passage_id"]: "over_cap" for d in report.get("over_cap", [])})
        stage_of.update({d["passage_id"]: "suppressed" for d in report.get("suppressed", [])})
        stage_of.update({d["passage_id"]: "dropped" for d in report.get("dropped", [])})
        stage_of.update({u["passage_id"]: "used" for u in used})
        facts = []
        for pid in relevant:
            rank, cos = sem.get(pid, (None, 0.0))
            evidence, named = lex.get(pid, (0.0, ()))
            facts.append({"pid": pid, "stage": stage_of.get(pid, ""), "sem_rank": rank, "cosine": cos,
                          "pool_rank": bm25_rank.get(pid), "lex_candidate": pid in lexical_ids, "evidence": evidence,
                          "named": named, "heading": passages[pid][1], "second": second.get(pid)})
        order = {"used": 0, "admitted": 1, "dropped": 2, "suppressed": 3, "over_cap": 4, "below_cut": 5, "": 6}
        facts.sort(key=lambda f: (order[f["stage"]], -(f["second"] if f["second"] is not None else -1.0),
                                  -relevance(f["evidence"], f["cosine"])))
        best = facts[0] if facts else None
        floor, required = found.sem.floor, found.weights.required if found.lexical else 0.0
        best_sem = min((f for f in facts if f["sem_rank"]), key=lambda f: f["sem_rank"], default=None)
        best_lex = max(facts, key=lambda f: f["evidence"], default=None)
        out.append({
            "id": scene["id"], "document": scene["document"], "hit": hit, "scene": scene["scene"],
            "cause": "hit" if hit else _cause(best, {"floor": found.second.floor, "per_path": tuning_of(camp).stage_candidates}
                                              if found.staged else None),
            "second": round(best["second"], 3) if best and best.get("second") is not None else None,
            "second_floor": found.second.floor if found.staged else None,
            "relevant_passages": len(relevant),
            "best_stage": best["stage"] if best else "",
            "sem_rank": best_sem["sem_rank"] if best_sem else None,
            "cosine": round(best_sem["cosine"], 3) if best_sem else None,
            "floor": floor,
            "bm25_rank": min((f["pool_rank"] for f in facts if f["pool_rank"]), default=None),
            "evidence": round(best_lex["evidence"], 2) if best_lex else 0.0,
            "required": round(required, 2),
            "heading_names": list(best_lex["named"]) if best_lex else [],
            "relevant_heading": (best_sem or best or {}).get("heading", ""),
            "used": [f"{u.get('heading', '')} [{u.get('found_by', '')}; cos {u.get('cosine')}; ev {u.get('evidence')}]"
                     for u in used],
            "instead": [("relevant" if is_relevant(scene, *passages[u["passage_id"]], labels.documents) else
                         "same document" if passages[u["passage_id"]][0] == labels.documents[scene["document"]]["file"]
                         else "other document") + f" ({u.get('found_by', '')})" for u in used if u["passage_id"] > 0],
            "below_cut": len(report.get("below_cut", [])), "dropped": len(report.get("dropped", [])),
            "terms": found.words,
        })
    return pd.DataFrame(out, columns=DIAGNOSIS_COLUMNS)  # the columns even when every scene hit


def _pool(db, campaign_id: int, words: Sequence[str]) -> list[tuple[int, float]]:
    """The bm25 pool the lexical path re-scores (its first LEXICAL_POOL)."""

    with db.reading() as s:
        return lexical.search(s, campaign_id, list(words), DEFAULT.lexical_pool)


def causes(diagnosis: pd.DataFrame) -> pd.DataFrame:
    """Missed scenes per cause and document."""
    missed = diagnosis[~diagnosis.hit] if len(diagnosis) else diagnosis
    if not len(missed):
        return pd.DataFrame(columns=["total"])
    return missed.groupby(["cause", "document"]).size().unstack(fill_value=0).assign(
        total=lambda t: t.sum(axis=1)).sort_values("total", ascending=False)


def admitted_irrelevant(frame: pd.DataFrame, labels: Labels, window: int) -> pd.DataFrame:
    """Targeted scenes' admitted passages that were not relevant, by how they got in."""
    rows = frame[(frame.window == window) & (frame.kind == "targeted")]
    out = []
    for r in rows.itertuples():
        for heading, by, file, good in zip(r.headings, r.found_by, r.files, r.is_relevant, strict=True):
            if not good:
                out.append({"id": r.id, "document": r.document, "heading": heading, "found_by": by, "file": file,
                            "same_document": labels.documents[r.document]["file"] == file})
    return pd.DataFrame(out)


# ---------------------------------------------------------------- pair set
def _query(scene: str) -> str:
    """The scene as a turn searches with it (the input line, as the query)."""

    return scene_query([player_line(scene)])


def _cosines(camp, queries: Sequence[str]):
    """(passage ids, queries x passages cosines) by the library's own stored
    vectors and the configured embedder."""

    library, embedder = camp.knowledge, camp.workbench.embedder_or_none()
    with library.db.reading() as s:
        held = load_matrix(s, cache_key(library.db, camp.id, embedder.model_id), camp.id, embedder.model_id)
        matrix, _ = held.live(tuple(int(i) for i in library.list().index), 10**9)
    return [int(i) for i in matrix.passage_ids], search.centred(embedder.model_id, as_query(embedder)(list(queries))) @ matrix.vectors.T


def _neighbours(camp, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
    """Each query's k nearest passages by the library's own stored vectors."""
    ids, scores = _cosines(camp, queries)
    return [[(ids[i], float(row[i])) for i in np.argsort(-row)[:k]] for row in scores]


def export_pairs(camp, labels: Labels, path: str | Path, *, relevant_per_scene: int = 3,
                 neighbours: int = 10) -> dict:
    """A calibration pair set (engine.knowledge.calibrate's format) from the
    evaluated library: each targeted scene with up to `relevant_per_scene`
    of its relevant passages (the nearest first), and, as the passages every
    off-topic scene is scored against, those plus each off-topic scene's
    `neighbours` nearest passages, the hardest negatives the library has.
    Queries are in the form a turn searches with."""
    passages = passages_of(camp)
    targeted_q = [_query(t["scene"]) for t in labels.targeted]
    off_q = [_query(s) for s in labels.off_topic]
    near_t = _neighbours(camp, targeted_q, 400)
    chosen: dict[int, None] = {}
    pairs = []
    for scene, query, near in zip(labels.targeted, targeted_q, near_t, strict=True):
        ranked = [pid for pid, _ in near] + sorted(passages)
        relevant = [pid for pid in dict.fromkeys(ranked) if is_relevant(scene, *passages[pid], labels.documents)]
        for pid in relevant[:relevant_per_scene]:
            chosen[pid] = None
            pairs.append({"query": query, "passage": str(pid), "scene": scene["id"]})
    for near in _neighbours(camp, off_q, neighbours):
        chosen.update((pid, None) for pid, _ in near)
    data = {"name": f"{labels.name}-pairs", "about": (
        "Generated by experiments.retrieval_eval.export_pairs from the labelled scenes and the public documents "
        "in tests/data/knowledge; calibrate it with rule='above_off_topic'."),
        "passages": {str(pid): {"heading": passages[pid][1], "text": passages[pid][2]} for pid in chosen},
        "targeted": pairs, "off_topic": off_q}
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"passages": len(chosen), "targeted": len(pairs), "off_topic": len(off_q)}


# ---------------------------------------------------------------- passage sizes
def reference_cap(knowledge_tokens: int) -> int:
    """What one Reference passage's framed block may cost when retrieval has
    `knowledge_tokens` (measured by `evaluate`, column knowledge_tokens): the
    Reference class's share, less its section header and separator."""

    return int(knowledge_tokens * CLASS_SHARE[REFERENCE]) - tokens.count(CLASS_HEADERS[REFERENCE]) \
        - tokens.count(SEPARATOR)


def passage_sizes(labels: Labels, knowledge_tokens: int, targets: Sequence[int] = (128, 256, 384, 512, 800)
                  ) -> pd.DataFrame:
    """For each chunk ceiling and document: how many passages, their median
    size, and the share whose framed block fits the Reference share of
    `knowledge_tokens` (so could ever be shown in such a prompt)."""

    cap = reference_cap(knowledge_tokens)
    rows = []
    for target in targets:
        for key, doc in labels.documents.items():
            text = (DATA_DIR / doc["file"]).read_text(encoding="utf-8-sig")
            passages = chunk(text, markdown=doc["file"].endswith(".md"), target_max=int(target),
                             hard_max=max(16, int(target) - 24))
            costs = [tokens.count(block(Retrieved(0, 0, doc["file"], doc["file"], doc["class"], False,
                                                  p.heading, p.index + 1, p.text, p.tokens)))
                     + tokens.count(SEPARATOR) for p in passages]
            rows.append({"target": int(target), "document": key, "passages": len(passages),
                         "median_tokens": float(pd.Series([p.tokens for p in passages]).median()),
                         "fits_share": round(sum(c <= cap for c in costs) / max(len(costs), 1), 4),
                         "cap": cap})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- what the signals can reach
# The bm25 weight tried beside the engine's relevance (bm25 runs to ~45 on
# this library, the cosine to ~0.7).
BM25_SCALE = 0.01


@dataclass(frozen=True)
class Signals:
    """Every scene against every passage of the library, on the signals the
    engine has: the cosine of the stored vectors, the rarity-weighted lexical
    evidence (`admission`), FTS5's bm25, and the labels' verdict. Targeted
    scenes come first."""

    ids: tuple[str, ...]
    targeted: np.ndarray  # (scenes,) bool
    passage_ids: tuple[int, ...]
    cosine: np.ndarray  # (scenes, passages); zeros without an embedder
    evidence: np.ndarray
    bm25: np.ndarray
    relevant: np.ndarray  # (scenes, passages) bool; never true for an off-topic scene
    second: np.ndarray | None = None  # the second stage's model, as a turn scores with it; None without one

    def scores(self) -> dict[str, np.ndarray]:
        """Each way of ordering passages that the analysis compares: each
        signal alone, the engine's own relevance (`ranking.relevance`), and
        that plus bm25; with a second stage, its model's score over the
        whole library alone and with the lexical evidence as a turn weighs it."""

        relevance = self.cosine + DEFAULT.evidence_scale * self.evidence
        out = {"engine relevance": relevance, "relevance + bm25": relevance + BM25_SCALE * self.bm25,
               "lexical evidence": self.evidence, "bm25": self.bm25}
        if self.cosine.any():
            out["cosine"] = self.cosine
        if self.second is not None:
            out["relevance model"] = self.second
            if DEFAULT.second_evidence_scale:
                out["relevance model + evidence"] = self.second + DEFAULT.second_evidence_scale * self.evidence
        return out


def signals(camp, labels: Labels, *, progress: bool = True) -> Signals:
    """Score every passage for every scene (the scene as a turn searches
    with it), by the engine's own functions: the candidate caps, floors and
    budget are left out on purpose, to see what any admission rule built on
    these signals could do."""

    passages, embedder, db = passages_of(camp), camp.workbench.embedder_or_none(), camp.knowledge.db
    scenes = _scenes(labels)
    queries = [_query(s["scene"]) for _, s in scenes]
    if embedder is not None:
        ids, cos = _cosines(camp, queries)
    else:
        ids, cos = sorted(passages), None
    col = {pid: j for j, pid in enumerate(ids)}
    shape = (len(scenes), len(ids))
    evidence, bm25, relevant = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    with db.reading() as s:
        heads = reads.headings(s, camp.id, ids)
    for i, ((kind, scene), query) in enumerate(tqdm(list(zip(scenes, queries, strict=True)), desc="scoring scenes",
                                                       disable=not progress, leave=False)):
        found = search.find(db, camp.id, query, tuning=tuning_of(camp))
        by_words = _lexical_of(camp, found.words, ids, found, heads)
        evidence[i] = [by_words[pid][0] for pid in ids]
        with db.reading() as s:
            scored = lexical.search(s, camp.id, found.words, len(ids))
        for pid, score in scored:
            if pid in col:
                bm25[i, col[pid]] = score
        if kind == "targeted":
            relevant[i] = [is_relevant(scene, *passages[pid], labels.documents) for pid in ids]
    return Signals(tuple(s["id"] for _, s in scenes), np.array([k == "targeted" for k, _ in scenes]), tuple(ids),
                   cos if cos is not None else np.zeros(shape), evidence, bm25, relevant,
                   _second_scores(camp, queries, ids))


def _second_scores(camp, queries: Sequence[str], ids: Sequence[int]) -> np.ndarray | None:
    """(scenes, passages) scores of the second stage's model over the whole
    library, each scene's parts embedded as a turn embeds them (query side,
    centred); None without a second stage or while its vectors are incomplete."""
    stage = second_stage_of(camp)
    if stage is None or not stage.needs_vectors:
        return None
    held, matrix = _library_matrix(camp, stage.model_id)
    if len(held) < len(ids):
        return None
    where = {pid: j for j, pid in enumerate(held)}
    col = [where[pid] for pid in ids]
    parts = tuning_of(camp).stage_parts
    out = np.zeros((len(queries), len(ids)), dtype=np.float32)
    for i, query in enumerate(queries):
        out[i] = _stage_scores(stage, matrix, query, parts)[col]
    return out


def _stage_scores(stage, matrix: np.ndarray, query: str, parts: int, *, centre: bool = True) -> np.ndarray:
    """Each row of `matrix` (second-stage passage vectors) scored for a
    scene's query as a turn scores it: the model's query side of the newest
    `parts` paragraphs, centred (`VectorStage.query`), a passage's best part;
    `centre=False` leaves the model's query centre on."""
    asked = query_parts(query)[:parts]
    q = stage.query(asked) if centre else unit(as_query(stage.embedder)(asked))
    return np.max(np.einsum("ij,kj->ik", matrix, q), axis=1)


def elsewhere_first(camp, labels: Labels, document: str) -> dict[str, int]:
    """How many of `document`'s targeted scenes get their relevance model's
    best passage of the whole library from another document, with the
    query centred as a turn centres it and without: what the model's shared
    query direction does to a mixed library."""
    stage = second_stage_of(camp)
    ids, matrix = _library_matrix(camp, stage.model_id)
    passages = passages_of(camp)
    mine = labels.documents[document]["file"]
    scenes = [t for t in labels.targeted if t["document"] == document]
    out = {"scenes": len(scenes), "centred": 0, "not centred": 0}
    for scene in scenes:
        for name, centre in (("centred", True), ("not centred", False)):
            scores = _stage_scores(stage, matrix, _query(scene["scene"]), tuning_of(camp).stage_parts, centre=centre)
            out[name] += passages[ids[int(np.argmax(scores))]][0] != mine
    return out


def _first_relevant_rank(score: np.ndarray, relevant: np.ndarray) -> int:
    """Where the best relevant passage stands (1 = first); a tie counts for
    it (this is a ceiling); 0 when the scene has no relevant passage."""
    if not relevant.any():
        return 0
    return int((score > score[relevant].max()).sum()) + 1


def rank_table(sig: Signals, ks: Sequence[int] = (1, 2, 3, 5, 10, 40)) -> pd.DataFrame:
    """Per way of ordering: targeted scenes whose first relevant passage is
    among the best k of the whole library. No admission rule, floor or
    budget can give a scene a relevant passage that is not among what it
    shows, so at a window that shows k passages this is the most any rule on
    that ordering can reach."""
    rows = []
    targeted = np.flatnonzero(sig.targeted)
    for name, score in sig.scores().items():
        ranks = [_first_relevant_rank(score[i], sig.relevant[i]) for i in targeted]
        rows.append({"ordering": name, **{f"within {k}": sum(0 < r <= k for r in ranks) for k in ks},
                     "scenes": len(targeted)})
    return pd.DataFrame(rows).set_index("ordering")


def reach(sig: Signals, caps: Sequence[int] = (1, 2, 3, 5, 10), allowed: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """The best an absolute threshold on each ordering can do: for each cap
    (passages a scene may show) and each number of off-topic scenes allowed
    to admit anything, the threshold is set just above the score of the
    off-topic scene that would be one too many, chosen on these very scenes
    (so the figures are optimistic, never pessimistic)."""
    rows = []
    targeted, off = np.flatnonzero(sig.targeted), np.flatnonzero(~sig.targeted)
    for name, score in sig.scores().items():
        off_best = np.sort(score[off].max(axis=1))[::-1] if len(off) else np.array([])
        for a in allowed:
            bar = float(np.nextafter(off_best[a], np.inf)) if a < len(off_best) else -np.inf
            for k in caps:
                hits = shown = good = 0
                for i in targeted:
                    top = [j for j in np.argsort(-score[i], kind="stable")[:k] if score[i, j] >= bar]
                    shown += len(top)
                    good += int(sig.relevant[i, top].sum())
                    hits += bool(sig.relevant[i, top].any())
                admitting = sum(bool((score[i] >= bar).any()) for i in off)
                rows.append({"ordering": name, "cap": k, "off_topic_allowed": a, "threshold": round(bar, 4),
                             "hits": hits, "hit_rate": round(hits / max(len(targeted), 1), 3),
                             "precision": round(good / shown, 3) if shown else None,
                             "off_topic_admitting": admitting})
    return pd.DataFrame(rows)


def plot_ranks(table: pd.DataFrame, targets: Sequence[float] = (0.85, 0.90)):
    """Share of targeted scenes whose first relevant passage is within the
    best k, per ordering, against the hit-rate targets."""

    ks = [int(c.split()[-1]) for c in table.columns if c.startswith("within ")]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for name, row in table.iterrows():
        ax.plot(ks, [row[f"within {k}"] / row["scenes"] for k in ks], marker="o", label=name)
    for t in targets:
        ax.axhline(t, color="k", ls="--", lw=1)
        ax.annotate(f"target {t:.0%}", (ks[0], t), textcoords="offset points", xytext=(2, 3), fontsize=8)
    ax.set(xscale="log", xticks=ks, xticklabels=[str(k) for k in ks], ylim=(0, 1.02),
           xlabel="passages shown (best k of the whole library)", ylabel="targeted scenes with a relevant one",
           title="the most any admission rule on each ordering can reach")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- plots
def plot_windows(frame: pd.DataFrame):

    summary = summarise(frame)
    windows = sorted(summary)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    metrics = (("hit_rate", "targeted scenes with a relevant passage", 0.85),
               ("precision", "admitted passages that are relevant", 0.80))
    for ax, (key, title, target) in zip(axes, metrics, strict=False):
        ax.bar([str(w) for w in windows], [summary[w][key] for w in windows], color="#4c72b0")
        ax.axhline(target, color="k", ls="--", lw=1, label=f"target {target:.0%}")
        ax.set(title=title, ylim=(0, 1), xlabel="window")
        ax.legend(loc="lower right")
    ax = axes[2]
    ax.bar([str(w) for w in windows], [summary[w]["off_topic_admitting"] for w in windows], color="#c44e52")
    ax.axhline(1, color="k", ls="--", lw=1, label="target ≤ 1")
    ax.set(title=f"off-topic scenes admitting anything (of {summary[windows[0]]['off_topic']})", xlabel="window")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return fig


def plot_sizes(sizes: pd.DataFrame):

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for key, rows in sizes.groupby("document"):
        ax.plot(rows.target, rows.fits_share, marker="o", label=key)
    ax.set(title=f"passages that fit the Reference share ({int(sizes.cap.iloc[0])} tokens)",
           xlabel="chunk ceiling (tokens)", ylabel="share of passages", ylim=(0, 1.05))
    ax.legend()
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the fused second stage (issue 25)
FUSION_FEATURES = ("second", "cosine", "evidence_ratio")


def _library_matrix(camp, model: str) -> tuple[list[int], np.ndarray]:
    """(passage ids, unit second-stage vectors) of every live passage that has one."""

    db = camp.knowledge.db
    ids = sorted(passages_of(camp))
    with db.reading() as s:
        hashes = dict(s.execute(text_sql(ids)).all())
        vectors = stage_vectors.vectors_for(s, model, set(hashes.values()))
    held = [pid for pid in ids if hashes.get(pid) in vectors]
    if not held:
        return [], np.zeros((0, 0), dtype=np.float32)
    return held, np.stack([vectors[hashes[pid]] for pid in held])


def fusion_table(camp, labels: Labels, *, scan: int = 20, progress: bool = True) -> pd.DataFrame:
    """Every candidate each scene could give the second stage, as the scene
    is asked in this campaign: both first-stage paths' whole candidate lists
    (the engine's caps) and the second model's own best `scan` passages of
    the whole library, each with its place in each path (`lex_rank`,
    `sem_rank`, `scan_rank`), the features the fused score reads (the second
    model's score, MiniLM's cosine, lexical evidence over the scene's bar),
    its framed cost in tokens, its class, and whether it is relevant. What
    the fused model is fitted on and its constants swept on (`fusion_sweep`)."""

    stage = second_stage_of(camp)
    if stage is None or not stage.needs_vectors:
        return pd.DataFrame()
    passages, db = passages_of(camp), camp.knowledge.db
    ids, matrix = _library_matrix(camp, stage.model_id)
    if len(ids) < len(passages):  # the engine scans only a complete library; so does the table
        scan = 0
    rows = []
    for kind, scene, query, found in first_stage(camp, labels, "fusion table", progress):
        second = _stage_scores(stage, matrix, query, tuning_of(camp).stage_parts) if len(ids) else np.zeros(0)
        order = np.argsort(-second, kind="stable")
        scan_rank = {ids[j]: r + 1 for r, j in enumerate(order[:scan])}
        second_of = dict(zip(ids, second.tolist(), strict=True))
        lex = {pid: i + 1 for i, (pid, _) in enumerate(found.lexical)}
        sem = {pid: i + 1 for i, (pid, _) in enumerate(found.sem.hits)}
        wanted = list(dict.fromkeys([*lex, *sem, *scan_rank]))
        cosine = search.first_cosines(found, wanted)
        required = found.weights.required if found.lexical else 0.0
        with db.reading() as s:
            loaded = search.load_passages(s, camp.id, wanted)
        for pid in wanted:
            r = loaded[pid]
            rows.append({"kind": kind, "id": scene["id"], "passage_id": pid,
                         "relevant": kind == "targeted" and is_relevant(scene, *passages[pid], labels.documents),
                         "lex_rank": lex.get(pid), "sem_rank": sem.get(pid), "scan_rank": scan_rank.get(pid),
                         "second": second_of.get(pid), "cosine": cosine.get(pid, 0.0),
                         "evidence": found.strength.get(pid, 0.0), "required": required,
                         "evidence_ratio": evidence_feature(found.strength.get(pid, 0.0), required),
                         "cost": passage_cost(r), "class": r.classification,
                         "weight": CLASS_WEIGHTS.get(r.classification, 1.0)})
    return pd.DataFrame(rows)


def fit_fusion(table: pd.DataFrame, features: Sequence[str] = FUSION_FEATURES, *, c: float = 1.0) -> dict:
    """A logistic regression of relevance on `features` over every candidate
    of `table` (everyday scenes' candidates are all irrelevant): the fused
    score's coefficients. Class weights balanced, because relevant
    candidates are a few in a hundred."""
    from sklearn.linear_model import LogisticRegression

    rows = table[table.second.notna()]
    found = set(rows.relevant.astype(bool))
    if found != {True, False}:
        which = "relevant" if True in found else "irrelevant"
        raise NotAllowed(f"The fused score cannot be fitted: every candidate the second stage scored is {which} "
                         f"({len(rows)} candidates). Tune on more scenes, or raise the candidates per path so "
                         "the relevant passages reach the second stage.")
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=1000)
    model.fit(rows[list(features)].to_numpy(), rows.relevant.to_numpy())
    return {"bias": float(model.intercept_[0]), **{f: float(w) for f, w in zip(features, model.coef_[0], strict=True)}}


def fused(table: pd.DataFrame, coefficients: dict) -> pd.Series:
    """The fused score of every candidate of `table` (the engine's formula)."""

    f = Fusion(coefficients["bias"], coefficients.get("second", 0.0), coefficients.get("cosine", 0.0),
               coefficients.get("evidence_ratio", 0.0), 0.5, 0.0, 99)
    return pd.Series([f.score(s, c, e) for s, c, e in zip(table.second.fillna(0.0), table.cosine,
                                                          table.evidence_ratio, strict=True)], index=table.index)


def knowledge_tokens(camp, windows: Sequence[int]) -> dict[int, int]:
    """The retrieved passages' budget at each window, as a turn computes it."""
    out = {}
    for window in windows:
        _window(camp, int(window))
        out[int(window)] = int((camp.context("A quiet moment.")["knowledge"] or {})["budget"]["knowledge_tokens"])
    return out


def fusion_floors(table: pd.DataFrame, score: pd.Series, extra: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9)
                  ) -> list[float]:
    """Floors worth sweeping on the fused score: just above each of the
    three best everyday scenes' best scores (where the count of everyday
    scenes admitting changes), and a coarse grid."""
    best = score.groupby([table.id, table.kind]).max()
    off = sorted((v for (_, kind), v in best.items() if kind == "off_topic"), reverse=True)[:3]
    return sorted({round(float(v) + 1e-3, 3) for v in off} | {float(x) for x in extra})


def fusion_of(coefficients: dict, chosen):
    """The engine's Fusion from fitted coefficients and a sweep's chosen row."""

    return Fusion(round(coefficients["bias"], 3), round(coefficients.get("second", 0.0), 3),
                  round(coefficients.get("cosine", 0.0), 3), round(coefficients.get("evidence_ratio", 0.0), 3),
                  float(chosen["floor"]), float(chosen["cut"]), int(chosen["cap"]))


def _fill(costs: Sequence[int], classes: Sequence[str], knowledge_tokens: int) -> list[int]:
    """The budget's greedy fill (engine.knowledge.allotment.allot) on passages
    already in rank order: Canon first, each class under its share, a
    passage that does not fit skipped. Section headers are approximated by
    one flat cost per class opened. Indexes of what fits."""

    keep, spent = [], 0
    for cls in FILL_ORDER:
        cap = min(knowledge_tokens - spent, int(knowledge_tokens * CLASS_SHARE[cls]))
        used = 0
        for i, (cost, c) in enumerate(zip(costs, classes, strict=True)):
            if c != cls:
                continue
            cost = cost + (12 if not used else 0)
            if used + cost <= cap:
                keep.append(i)
                used += cost
        spent += used
    return keep


def plain_sweep(table: pd.DataFrame, floor: float, cuts: Sequence[float], caps: Sequence[int],
                scales: Sequence[float] = (0.0, 0.01), margins: Sequence[float] = (0.0,), **kw) -> pd.DataFrame:
    """`fusion_sweep` for the second model's plain score, as the engine runs
    it without a fused model: admitted at the model's `floor` (its calibrated
    one) plus each of `margins` (the tuning's `second_floor_margin`), ordered
    and cut on its cosine plus `scale` times the lexical evidence (each of
    `scales`), at most `cap` admitted. Rows carry `arm="plain"`, their
    `scale` and `margin`."""
    rows = [fusion_sweep(table, table.second + scale * table.evidence, [round(floor + margin, 4)], cuts, caps,
                         gate=table.second, **kw).assign(arm="plain", scale=scale, margin=margin)
            for scale in scales for margin in margins]
    return pd.concat(rows, ignore_index=True)


def chosen_tuning(base: search.Tuning, chosen, coefficients: dict | None = None) -> search.Tuning:
    """The engine's tuning for a sweep's chosen row: the plain second stage's
    cut, cap and evidence scale, or the fused model from `coefficients`; the
    candidate paths either way."""
    paths = dict(stage_candidates=int(chosen["per_path"]), scan_candidates=int(chosen["scan"]))
    if chosen.get("arm") == "plain":
        return replace(base, fused=False, fusion=(), second_cut=float(chosen["cut"]), second_cap=int(chosen["cap"]),
                       second_evidence_scale=float(chosen["scale"]),
                       second_floor_margin=float(chosen.get("margin", 0.0)), **paths)
    f = fusion_of(coefficients or {}, chosen)
    return replace(base, fused=True, fusion=(f.bias, f.second, f.cosine, f.evidence, f.floor, f.cut, f.cap), **paths)


def finalists(sweep: pd.DataFrame, n: int = 6, window: int = 4096, off_topic: int = 1) -> pd.DataFrame:
    """The sweep's best `n` distinct rows by `choose`'s order (everyday
    scenes admitting at most `off_topic`, most hits, then precision), and
    the best row of the other arm, for `confirm` to ask through the engine."""
    ok = sweep[sweep[f"off_topic_{window}"] <= off_topic]
    ok = ok if len(ok) else sweep
    order = ok.sort_values([f"hits_{window}", f"off_topic_{window}", f"precision_{window}"],
                           ascending=[False, True, False], kind="stable")
    keys = [c for c in ("arm", "paths", "floor", "cut", "cap", "scale") if c in order]
    top = order.drop_duplicates(subset=keys).head(n)
    others = order[~order.arm.isin(top.arm.unique())].head(1) if "arm" in order else order.head(0)
    return pd.concat([top, others])


def confirm(camp, labels: Labels, rows: pd.DataFrame, coefficients: dict | None = None,
            windows: Sequence[int] = (4096, 16384), paraphrase: Sequence[str] = (), progress: bool = True
            ) -> pd.DataFrame:
    """Each sweep row's constants set on the campaign (`chosen_tuning`) and
    its scenes asked through `camp.context`: what the engine itself does
    with them. The sweep's budget fill approximates the engine's (it
    over-counted the tuning half's hits at 4,096 by three of 58 for the
    centred int8 model), so the constants are taken from these figures. The
    campaign's tuning is restored afterwards. One row per sweep row, with
    `hits_<window>`, `precision_<window>`, `off_topic_<window>` and
    `paraphrase_hits_<window>`."""
    wb = camp.workbench
    saved = wb.settings.tuning
    out = []
    try:
        for _, row in tqdm(list(rows.iterrows()), desc="confirming", disable=not progress, leave=False):
            wb.configure(tuning=chosen_tuning(saved, row, coefficients))
            frame = evaluate(camp, labels, windows=windows, stages=["auto"], progress=False)
            figures = {k: row[k] for k in ("arm", "paths", "per_path", "scan", "floor", "margin", "cut", "cap", "scale")
                       if k in row and not (isinstance(row[k], float) and pd.isna(row[k]))}
            for window, got in summarise(frame, paraphrase).items():
                figures.update({f"hits_{window}": got["targeted_hits"], f"precision_{window}": got["precision"],
                                f"off_topic_{window}": got["off_topic_admitting"],
                                f"paraphrase_hits_{window}": got.get("paraphrase_hits", 0),
                                f"sweep_hits_{window}": row.get(f"hits_{window}")})
            out.append(figures)
    finally:
        wb.configure(tuning=saved)
    return pd.DataFrame(out)


def fusion_sweep(table: pd.DataFrame, score: pd.Series, floors: Sequence[float], cuts: Sequence[float],
                 caps: Sequence[int], paths: dict[str, dict] | None = None,
                 knowledge_tokens: dict[int, int] | None = None, paraphrase: Sequence[str] = (),
                 gate: pd.Series | None = None) -> pd.DataFrame:
    """Hits, precision and everyday scenes admitting anything for each floor
    on the fused `score`, relative cut, admitted-count cap and candidate set
    (`paths`: name -> {"per_path", "scan"}), with the budget's own fill at
    each window's knowledge tokens ({4096: 883, 16384: ...}); with
    `paraphrase` ids, their hits too. `gate`: what the floor is read on when
    it is not the ordering score (the engine's plain second stage admits on
    the model's cosine and orders on the cosine plus a little evidence)."""
    paths = paths or {"40+40": {"per_path": 40, "scan": 0}}
    knowledge_tokens = knowledge_tokens or {4096: 883}
    base = table.assign(fused=score.to_numpy(), gate=(score if gate is None else gate).to_numpy())
    n_targeted = base[base.kind == "targeted"].id.nunique()
    para = set(paraphrase)
    scenes = []
    for sid, g in base.groupby("id", sort=False):
        g = g.assign(rank_score=g.fused * g.weight).sort_values("rank_score", ascending=False, kind="stable")
        scenes.append((sid, g.kind.iloc[0] == "targeted", g.fused.to_numpy(), g.cost.to_numpy(), g["class"].tolist(),
                       g.relevant.to_numpy(), g.lex_rank.fillna(999).to_numpy(), g.sem_rank.fillna(999).to_numpy(),
                       g.scan_rank.fillna(999).to_numpy(), g.gate.to_numpy()))
    out = []
    for name, p in paths.items():
        for floor, cut_, cap in ((f, c, k) for f in floors for c in cuts for k in caps):
            row = {"paths": name, "per_path": p["per_path"], "scan": p.get("scan", 0), "floor": floor, "cut": cut_,
                   "cap": cap}
            tally = {w: [0, 0, 0, 0, 0] for w in knowledge_tokens}  # hits, shown, relevant, off admitting, para hits
            for sid, targeted, fz, cost, cls, rel, lr, sr, cr, gz in scenes:
                inside = (lr <= p["per_path"]) | (sr <= p["per_path"]) | (cr <= p.get("scan", 0))
                ok = inside & (gz >= floor)
                if not ok.any():
                    continue
                ok &= fz >= cut_ * fz[ok].max()
                idx = np.flatnonzero(ok)[:cap]
                for w, k in knowledge_tokens.items():
                    shown = idx[_fill(cost[idx].tolist(), [cls[i] for i in idx], k)]
                    t = tally[w]
                    if targeted:
                        good = int(rel[shown].sum())
                        t[0] += good > 0
                        t[1] += len(shown)
                        t[2] += good
                        t[4] += good > 0 and sid in para
                    else:
                        t[3] += len(shown) > 0
            for w, (hits, shown, good, off, phits) in tally.items():
                row.update({f"hits_{w}": hits, f"hit_rate_{w}": round(hits / max(n_targeted, 1), 3),
                            f"precision_{w}": round(good / shown, 3) if shown else 1.0, f"off_topic_{w}": off})
                if para:
                    row[f"paraphrase_hits_{w}"] = phits
            out.append(row)
    return pd.DataFrame(out)
