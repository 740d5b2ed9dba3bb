"""Finding a scene's passages: both candidate paths, absolute admission and
the second stage, in one read transaction (`find`).

candidates (FTS5 re-scored by rarity, and cosine; each capped) -> admission
(absolute, per path: `admission`) -> the second stage, when one is
configured, scores both paths' candidates again and its floor replaces the
first stage's admission. What comes back (`Found`) is every candidate with
the evidence each path had for it; ordering, cutting and budgeting are the
caller's (`fusion`, and the knowledge library's allotment).

An embedder failure or a missing calibration never fails a search: it
narrows it to the lexical path and says so in the `Semantic` note.
"""
from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..store import Database
from ..vectors import QUERIES
from . import lexical, reads
from . import second_stage as stages
from .admission import Weights, lexical_admits, lexical_evidence, semantic_admits, weigh
from .calibration import centred, floor_for, uncalibrated_note
from .lexical import index_line
from .query import query_parts
from .results import Retrieved
from .second_stage import Rescored, rescore
from .tuning import DEFAULT, Tuning
from .vectors import Matrix, cache_key, cosines, load_matrix

__all__ = ["Found", "Semantic", "facts", "find", "first_cosines", "load_passages", "scored"]


# ---------------------------------------------------------------- loading
def load_passages(session, campaign_id: int, ids: Iterable[int]) -> dict[int, Retrieved]:
    """The admitted passages, in one statement (never one per passage)."""
    out = {}
    for pid, sid, pos, heading, text, n_tokens, digest, title, filename, cls, visibility in \
            reads.passage_rows(session, campaign_id, ids):
        out[pid] = Retrieved(passage_id=pid, source_id=sid, title=title, filename=filename, classification=cls,
                             hidden=visibility == "hidden", heading=heading, number=pos + 1, text=text,
                             tokens=n_tokens, content_hash=digest)
    return out


# ---------------------------------------------------------------- semantic
def _best_first(scores: np.ndarray, k: int) -> np.ndarray:
    """Indexes of the k best scores, best first (ties by position), without
    sorting all of them."""
    if k < len(scores):
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.lexsort((top, -scores[top]))]
    return np.argsort(-scores, kind="stable")


@dataclass
class Semantic:
    """What the first model's path did for one scene."""

    model: str = ""
    floor: float | None = None
    used: bool = False
    note: str = ""
    truncated: bool = False
    scanned: int = 0
    hits: list[tuple[int, float]] = field(default_factory=list)  # best first
    matrix: Matrix | None = None
    queries: list[np.ndarray] = field(default_factory=list)  # the scene's query vectors

    def vectors_of(self, ids: Iterable[int]) -> dict[int, np.ndarray]:
        if self.matrix is None:
            return {}
        found = ((i, self.matrix.vector_of(i)) for i in ids)
        return {i: v for i, v in found if v is not None}


def _semantic(session, db: Database, campaign_id: int, live: tuple[int, ...], parts: list[str], embedder,
              query_vector, exclude: Collection[int], tuning: Tuning) -> Semantic:
    if embedder is None:
        return Semantic(note="No embedder is configured, so retrieval is lexical only.")
    model = embedder.model_id
    out = Semantic(model=model, floor=floor_for(model, tuning))
    if out.floor is None:
        out.note = uncalibrated_note(model)
        return out
    if not parts:
        out.note = "The scene has no text to search on."
        return out
    held = load_matrix(session, cache_key(db, campaign_id, model), campaign_id, model)
    matrix, out.truncated = held.live(live, tuning.semantic_scan_limit)
    out.scanned = len(matrix)
    if not len(matrix):
        out.note = (f"No passages have been embedded with “{model}” yet, so retrieval is lexical only "
                    "until the library catches up.")
        return out
    try:
        # each part embedded once across turns (see engine.vectors.QUERIES): a
        # scene's story paragraphs were mostly in the last turn's query too
        vectors = centred(model, [query_vector] if query_vector is not None else QUERIES.embed(embedder, parts))
        # a passage's cosine is its best against any part of the scene
        scores = np.max([cosines(matrix.vectors, np.asarray(v, dtype=np.float32)) for v in vectors], axis=0)
    except Exception as exc:  # an embedder failure narrows retrieval, never fails it
        out.note = f"Semantic retrieval is unavailable this turn ({type(exc).__name__}: {exc}); lexical only."
        return out
    out.used = True
    out.queries = [np.asarray(v, dtype=np.float32) for v in vectors]
    for i in _best_first(scores, tuning.semantic_candidates + len(exclude)):
        pid = int(matrix.passage_ids[i])
        if pid in exclude:
            continue
        out.hits.append((pid, float(scores[i])))
        if len(out.hits) >= tuning.semantic_candidates:
            break
    out.matrix = matrix
    return out


# ---------------------------------------------------------------- retrieve
@dataclass
class Found:
    """What the database said about a scene, before any ranking: every
    candidate, each path's evidence for it, and which ones were admitted."""

    words: list[str]
    standing: set[str]
    library: reads.Sources
    lexical: list[tuple[int, float]]  # (passage id, bm25), best first
    evidence: dict[int, frozenset[int]]
    sem: Semantic
    always: list[int]
    weights: Weights = field(default_factory=lambda: Weights((), frozenset()))
    lead: Weights | None = None  # the newest paragraph's words alone, when the scene has more than one
    strength: dict[int, float] = field(default_factory=dict)  # lexical evidence per candidate
    lead_strength: dict[int, float] = field(default_factory=dict)
    admitted_lex: set[int] = field(default_factory=set)
    admitted_sem: set[int] = field(default_factory=set)
    loaded: dict[int, Retrieved] = field(default_factory=dict)
    second: Rescored | None = None  # the second stage's verdict, when one is configured
    scan: list[int] = field(default_factory=list)  # the second model's own best of the whole library
    tuning: Tuning = DEFAULT

    def candidates(self, per_path: int | None = None) -> list[int]:
        """Every path's candidates (each first-stage path's best `per_path`,
        then the second model's scan), lexical first, each once."""
        return list(dict.fromkeys([pid for pid, _ in self.lexical[:per_path]]
                                  + [pid for pid, _ in self.sem.hits[:per_path]] + self.scan))

    @property
    def staged(self) -> bool:
        """Whether the second stage judged this turn (else the first stage did)."""
        return self.second is not None and self.second.used


def find(db: Database, campaign_id: int, query_text: str, *, embedder=None, query_vector=None,
         exclude: Collection[int] = frozenset(), standing: Iterable[str] = (), stage=None,
         tuning: Tuning = DEFAULT) -> Found:
    """Both candidate paths and absolute admission, in one read transaction.

    `query_text` is the scene (`query.scene_query`); `embedder` the first
    model (None: lexical only); `query_vector`, if given, comes from that
    model and replaces embedding the query; `exclude` holds passage ids to
    leave out; `standing` names that are in every scene (the protagonist is
    added); `stage` a second stage (`second_stage.stage_for`), or None."""
    exclude = frozenset(int(i) for i in exclude)
    found = _find(db, campaign_id, query_text, embedder, query_vector, exclude, standing, stage, tuning)
    if found.second is not None:
        _judged[_judged_key(db, campaign_id, stage)] = found.staged
    return found


def _find(db: Database, campaign_id: int, query_text: str, embedder, query_vector, exclude: frozenset[int],
          standing: Iterable[str], stage, tuning: Tuning) -> Found:
    words = lexical.terms(query_text)[: tuning.max_terms]
    parts = query_parts(query_text)
    _second_query_ahead(db, campaign_id, stage, parts, tuning)
    with db.reading() as s:
        library = reads.sources(s, campaign_id)
        pool = [(pid, sc) for pid, sc in lexical.search(s, campaign_id, words, tuning.lexical_pool + len(exclude))
                if pid not in exclude][:tuning.lexical_pool]
        lists = _scoped_postings(s, words, library.live) if pool else _Lists()
        found = Found(
            words=words,
            standing=set(lexical.terms(library.protagonist)).union(*(lexical.terms(x) for x in standing)),
            library=library, lexical=pool,
            evidence=lexical.evidence(s, words, [pid for pid, _ in pool], lists),
            sem=_semantic(s, db, campaign_id, library.live, parts, embedder, query_vector, exclude, tuning),
            always=[i for i in reads.always_ids(s, library.always) if i not in exclude], tuning=tuning,
        )
        if pool:
            frequencies = [len(ids) for ids in lists]
            found.weights = weigh(frequencies, len(lists.live), words, found.standing, tuning=tuning)
            lead = _lead_words(parts, words)
            if lead is not None:
                found.lead = weigh(frequencies, len(lists.live), words, found.standing, only=lead, tuning=tuning)
            found.strength, found.lead_strength = _strengths(s, campaign_id, found)
            order = {pid: i for i, (pid, _) in enumerate(pool)}
            found.lexical = sorted(pool, key=lambda c: (-found.strength[c[0]], order[c[0]]))[:tuning.lexical_candidates]
            found.strength = {pid: found.strength[pid] for pid, _ in found.lexical}
        found.admitted_lex = {pid for pid, _ in found.lexical if _lexically_admitted(found, pid)}
        found.admitted_sem = {pid for pid, cos in found.sem.hits if semantic_admits(cos, found.sem.floor)}
        if stage is not None:
            _second(s, db, campaign_id, found, parts, stage, exclude)
            if found.staged:
                return found
        wanted = found.admitted_lex | found.admitted_sem | set(found.always)
        found.loaded = load_passages(s, campaign_id, wanted) if wanted else {}
    return found


# (file, campaign, second model) -> whether that model judged the campaign's
# last turn: the next turn embeds its query ahead only then (see below).
_judged: dict[tuple[str, int, str], bool] = {}


def _judged_key(db: Database, campaign_id: int, stage) -> tuple[str, int, str]:
    return str(db.path), campaign_id, stage.model_id


def _second_query_ahead(db: Database, campaign_id: int, stage, parts: list[str], tuning: Tuning) -> None:
    """Start the second model's query embedding in a thread of its own,
    beside the first stage, when that model judged this campaign's last turn.

    Why: with the story's parts prepared after the last reply, a turn's
    second stage waits on one all-mpnet-base-v2 pass over the player's line
    (~100 ms on one thread of the 2-core machine, measured), after a first
    stage of ~70 ms (its own MiniLM pass, the lexical and vector scans) that
    the second model needs nothing from. The stage's own `query` call later
    in the turn finds the line held, or being embedded, in the query-vector
    cache (`engine.vectors.QUERIES` waits for it), so nothing is passed and
    a failure here is met again, and reported, where the turn asks.

    Only after a judged turn: while the library's second-stage vectors are
    still being computed the stage judges nothing and needs no query, and a
    pass spent on it would only compete with the first stage for the cores."""
    if stage is None or not getattr(stage, "needs_vectors", False) or not parts:
        return
    if not _judged.get(_judged_key(db, campaign_id, stage)):
        return
    wanted = parts[:tuning.stage_parts]

    def embed():
        try:
            stage.query(wanted)
        except Exception:  # noqa: BLE001 - the turn's own call meets it and says so in the report
            pass

    threading.Thread(target=embed, name="second-stage-query", daemon=True).start()


def first_cosines(found: Found, ids: Iterable[int]) -> dict[int, float]:
    """The first model's cosine of each passage (its best against any part
    of the scene), for candidates whichever path found them."""
    if not found.sem.used or not found.sem.queries:
        return {}
    out = {}
    for pid, v in found.sem.vectors_of(ids).items():
        out[pid] = max(float(v @ q) / max(float(np.linalg.norm(q)), 1e-12) for q in found.sem.queries)
    return out


def _features(found: Found, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
    """What the fused second stage reads beside its own score: the first
    model's cosine and the lexical evidence over the scene's bar."""
    cosine = first_cosines(found, ids)
    required = found.weights.required if found.lexical else 0.0
    return {pid: (cosine.get(pid, 0.0), stages.evidence_feature(found.strength.get(pid, 0.0), required))
            for pid in ids}


def _second(session, db: Database, campaign_id: int, found: Found, parts: list[str], stage,
            exclude: Collection[int] = frozenset()) -> None:
    """Score every path's candidates with the second stage; when it judged
    them, its floor alone admits (see `second_stage`). A stage with stored
    vectors adds its own best of the whole library as a third path, once
    they are all computed."""
    query = None  # the scene's second-stage vectors, embedded once when the scan needs them first
    tuning = found.tuning
    if getattr(stage, "needs_vectors", False) and tuning.scan_candidates and parts:
        try:
            found.scan, query = stage.scan(session, db, campaign_id, found.library.live, parts[:tuning.stage_parts],
                                           tuning.scan_candidates, frozenset(exclude))
        except Exception:  # rescore below meets the same failure and says it in the report
            query, found.scan = None, []
    candidates = found.candidates(tuning.stage_candidates)
    pool = load_passages(session, campaign_id, set(candidates) | set(found.always))
    ranked = [pool[pid] for pid in candidates if pid in pool]
    found.second = rescore(stage, session, parts, [(r.passage_id, r.content_hash, index_line(r.heading, r.text))
                                                   for r in ranked],
                           first_model=found.sem.model if found.sem.used else None,
                           features=_features(found, [r.passage_id for r in ranked]), query=query, tuning=tuning)
    if not found.staged:
        return
    floor = found.second.floor
    admitted = {pid for pid, score in found.second.scores.items() if score >= floor}
    found.loaded = {pid: r for pid, r in pool.items() if pid in admitted or pid in set(found.always)}


class _Lists(list):
    """Postings per word, scoped to the live passages, with that scope."""

    live: frozenset[int] = frozenset()


def _scoped_postings(session, words: list[str], live_sources) -> _Lists:
    """Each word's passages within this campaign's live library (the index
    holds every campaign's passages; rarity is measured in this one's)."""
    live = reads.live_passage_ids(session, live_sources)
    out = _Lists(ids & live for ids in lexical.postings(session, words))
    out.live = live
    return out


def _lead_words(parts: Sequence[str], words: Sequence[str]) -> frozenset[int] | None:
    """Indexes of the query words in its newest paragraph (the reader's line
    and the state), when the query has other paragraphs too."""
    if len(parts) < 2:
        return None
    newest = set(lexical.terms(parts[0]))
    return frozenset(i for i, w in enumerate(words) if w in newest)


def _strengths(session, campaign_id: int, found: Found) -> tuple[dict[int, float], dict[int, float]]:
    """Lexical evidence of each candidate (see `admission`): its words'
    weights, doubled where its heading names them; against the whole query
    (the candidate's strength: the best of the two) and against its newest
    paragraph alone."""
    headings = reads.headings(session, campaign_id, [pid for pid, _ in found.lexical])
    whole, lead = {}, {}
    for pid, _ in found.lexical:
        matched = found.evidence.get(pid)
        named = lexical.in_heading(headings.get(pid, ""), found.words, matched or ())
        whole[pid] = lexical_evidence(matched, found.weights, named)
        if found.lead is not None:
            lead[pid] = lexical_evidence(matched, found.lead, named)
            whole[pid] = max(whole[pid], lead[pid])
    return whole, lead


def _lexically_admitted(found: Found, pid: int) -> bool:
    """By the whole scene's bar, or by the newest paragraph's own (the scene's
    other story raises the whole bar; the reader's line is still a scene)."""
    if found.lead is not None and lexical_admits(found.lead_strength.get(pid, 0.0), found.lead):
        return True
    return lexical_admits(found.strength.get(pid, 0.0), found.weights)


def facts(found: Found, query_text: str) -> dict:
    """The search half of the report: what was asked, what each path did."""
    sem = found.sem
    generated = {pid for pid, _ in found.lexical} | {pid for pid, _ in sem.hits}
    return {
        "query": query_text, "terms": found.words, "standing_terms": sorted(found.standing),
        "generated": len(generated),
        "rejected": len(generated - set(found.loaded)) if found.staged else
        len(generated - found.admitted_lex - found.admitted_sem),
        "lexical_required": round(found.weights.required, 3) if found.lexical else None,
        "lexical_required_newest": round(found.lead.required, 3) if found.lexical and found.lead else None,
        "considered": len(found.loaded), "sources": found.library.enabled,
        "embedding_model": sem.model, "semantic_floor": sem.floor if sem.floor is not None else 0.0,
        "semantic_calibrated": sem.floor is not None, "semantic_used": sem.used, "semantic_note": sem.note,
        "semantic_scanned": sem.scanned, "scan_truncated": sem.truncated,
        **_second_facts(found.second), "second_stage_scan": len(found.scan),
        "knowledge_share": found.tuning.knowledge_share, "always_share": found.tuning.always_share,
        "tuning": found.tuning.record(),
    }


def _second_facts(second: Rescored | None) -> dict:
    """The second stage's half of the report."""
    if second is None:
        return {"second_stage": "", "second_stage_used": False,
                "second_stage_note": "No second stage is configured: the first stage alone judged."}
    fusion = second.fusion
    return {"second_stage": second.model, "second_stage_used": second.used, "second_stage_floor": second.floor,
            "second_stage_note": second.note, "second_stage_scored": len(second.scores),
            "second_stage_fused": fusion is not None,
            **({"second_stage_fusion": {"bias": fusion.bias, "second": fusion.second, "cosine": fusion.cosine,
                                        "evidence": fusion.evidence, "floor": fusion.floor, "cut": fusion.cut,
                                        "cap": fusion.cap},
                "second_stage_raw": {str(pid): round(v, 4) for pid, v in second.raw.items()}} if fusion else {})}


def scored(found: Found) -> list[Retrieved]:
    """Loaded passages with their raw evidence from each path attached."""
    bm25, cos, always = dict(found.lexical), dict(found.sem.hits), set(found.always)
    second = found.second.scores if found.staged else {}
    out = []
    for pid, r in found.loaded.items():
        by_lex, by_sem = pid in found.admitted_lex, pid in found.admitted_sem
        if found.staged:  # admitted by the second stage: say which path found it (its scan is by meaning)
            by_lex, by_sem = pid in bm25, pid in cos or pid in found.scan
        admitted_by = "both" if by_lex and by_sem else "lexical" if by_lex else "semantic" if by_sem else ""
        matched = tuple(sorted(found.words[i] for i in found.evidence.get(pid, ()))) if by_lex else ()
        out.append(replace(r, always=pid in always, admitted_by=admitted_by, bm25=bm25.get(pid),
                           cosine=cos.get(pid), matched_terms=matched, evidence=found.strength.get(pid),
                           second=second.get(pid)))
    return out
