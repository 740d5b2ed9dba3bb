"""Hybrid retrieval: which imported passages the narrator sees this turn.

candidates (FTS5 and cosine, each capped) -> admission (absolute, per path,
see `admission`) -> ranking among survivors (`ranking`) -> near-repeats set
aside -> budget (`budget`). With a second stage (`second_stage`), the
candidates of both paths are scored again by the stronger model, and its
score and floor replace the first stage's admission and order. Every step is recorded in the report, so a turn's
knowledge can be explained afterwards: what was searched, what was found and
how, what it cost, and what was set aside and why.

An embedder failure or a missing calibration never fails retrieval: it
narrows it to the lexical path and says so in `semantic_note`.
"""
from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .. import html
from ..budget import tokens
from ..store import Database
from ..vectors import QUERIES
from . import fts, reads
from . import second_stage as stages
from .admission import Weights, lexical_admits, lexical_evidence, semantic_admits, weigh
from .budget import ALWAYS_SHARE, KNOWLEDGE_SHARE, Allotment, allot
from .calibration import floor_for, uncalibrated_note
from .chunking import index_line
from .classes import CLASS_LABELS
from .framing import SEPARATOR, block, static_sections, volatile_sections
from .query import query_parts
from .ranking import cut, normalise, normalise_second, rank, suppress
from .records import Retrieved
from .second_stage import Rescored, rescore
from .vectors import Matrix, cache_key, cosines, load_matrix

__all__ = ["LEXICAL_CANDIDATES", "LEXICAL_POOL", "SEMANTIC_CANDIDATES", "SEMANTIC_SCAN_LIMIT", "Selection",
           "retrieve"]

# Per-path caps before the merge: enough for any budget the share allows
# (a third of 32k tokens is ~40 passages of 256), small enough to load cheaply.
LEXICAL_CANDIDATES = 40
# bm25's best this many are re-scored by rarity-weighted evidence (see
# `admission`) before the lexical cap: bm25 over one text column cannot tell
# a passage a word names in its heading from one of the hundreds of monster
# stat blocks that mention it ("poisoned"). Measured on the retrieval
# evaluation: with bm25's top 40, 57 of 72 targeted scenes had a relevant
# candidate at all; with the top 300 re-scored, 72 of 72.
LEXICAL_POOL = 300
SEMANTIC_CANDIDATES = 40
# Vectors scored per turn. There is no approximate index; this is the honest
# bound in its place (4,000 x 384 dims score in 0.25 ms; the whole retrieval
# measured ~10 ms warm), and going past it is reported as scan_truncated.
SEMANTIC_SCAN_LIMIT = 4000


@dataclass(frozen=True)
class Selection:
    """The knowledge for one prompt.

    `passages` are the chosen ones: always-in-force Canon first, then the
    retrieved ones in fill order (Canon, Reference, Inspiration) and rank.
    `report` is JSON-ready. `system_sections` and `select` let the context
    builder re-price the same candidates against its own budgets.
    """

    passages: tuple[Retrieved, ...]
    report: dict = field(repr=False)
    candidates: tuple[Retrieved, ...] = field(default=(), repr=False)
    suppressed: tuple[Retrieved, ...] = field(default=(), repr=False)
    has_sources: bool = False
    hidden_sources: bool = False
    facts: dict = field(default_factory=dict, repr=False)
    # The always-in-force budget of the prompt being built, set by
    # system_sections so that select's report describes the same prompt.
    _pricing: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def always(self) -> tuple[Retrieved, ...]:
        return tuple(p for p in self.passages if p.always)

    @property
    def retrieved(self) -> tuple[Retrieved, ...]:
        return tuple(p for p in self.passages if not p.always)

    def rebudget(self, *, knowledge_tokens: int, always_tokens: int) -> Selection:
        """The same candidates under other limits (pure: no database)."""
        allotment = allot(self.candidates, knowledge_tokens=knowledge_tokens, always_tokens=always_tokens)
        return _assemble(self.candidates, self.suppressed, allotment, self.has_sources, self.hidden_sources,
                         self.facts)

    def system_sections(self, budget: int) -> list[tuple[str, str]]:
        """The knowledge rule and always-in-force Canon for a `budget`-token
        prompt (always-in-force takes at most ALWAYS_SHARE of it)."""
        self._pricing["always_tokens"] = int(max(0, budget) * ALWAYS_SHARE)
        chosen = self.rebudget(knowledge_tokens=self.report["budget"]["knowledge_tokens"],
                               always_tokens=self._pricing["always_tokens"])
        return static_sections(self.has_sources, self.hidden_sources, chosen.always)

    def select(self, tokens_available: int) -> tuple[list[tuple[str, str]], dict]:
        """Retrieved sections within `tokens_available` (already the knowledge
        share), ascending authority, and the report of that choice."""
        always = self._pricing.get("always_tokens", self.report["budget"]["always_tokens"])
        chosen = self.rebudget(knowledge_tokens=tokens_available, always_tokens=always)
        return volatile_sections(chosen.retrieved), chosen.report

    def __repr__(self) -> str:
        return f"<Selection: {self.report.get('summary', '')}>"

    def _repr_html_(self) -> str:
        rows = [(p.found_by, f"{CLASS_LABELS.get(p.classification, p.classification)}"
                 f"{' (narrator only)' if p.hidden else ''}", p.filename, p.heading, p.number, f"{p.score:.3f}", p.cost)
                for p in self.passages]
        header = ["found by", "class", "file", "heading", "passage", "score", "tokens"]
        return html.tag("div", html.tag("p", self.report.get("summary", ""))
                        + (html.table(rows, header=header) if rows else ""))


# ---------------------------------------------------------------- loading
def _load(session, campaign_id: int, ids: Iterable[int]) -> dict[int, Retrieved]:
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
class _Semantic:
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
              query_vector, exclude: Collection[int]) -> _Semantic:
    if embedder is None:
        return _Semantic(note="No embedder is configured, so retrieval is lexical only.")
    model = embedder.model_id
    out = _Semantic(model=model, floor=floor_for(model))
    if out.floor is None:
        out.note = uncalibrated_note(model)
        return out
    if not parts:
        out.note = "The scene has no text to search on."
        return out
    held = load_matrix(session, cache_key(db, campaign_id, model), campaign_id, model)
    matrix, out.truncated = held.live(live, SEMANTIC_SCAN_LIMIT)
    out.scanned = len(matrix)
    if not len(matrix):
        out.note = (f"No passages have been embedded with “{model}” yet, so retrieval is lexical only "
                    "until the library catches up.")
        return out
    try:
        # each part embedded once across turns (see engine.vectors.QUERIES): a
        # scene's story paragraphs were mostly in the last turn's query too
        vectors = [query_vector] if query_vector is not None else QUERIES.embed(embedder, parts)
        # a passage's cosine is its best against any part of the scene
        scores = np.max([cosines(matrix.vectors, np.asarray(v, dtype=np.float32)) for v in vectors], axis=0)
    except Exception as exc:  # an embedder failure narrows retrieval, never fails it
        out.note = f"Semantic retrieval is unavailable this turn ({type(exc).__name__}: {exc}); lexical only."
        return out
    out.used = True
    out.queries = [np.asarray(v, dtype=np.float32) for v in vectors]
    for i in _best_first(scores, SEMANTIC_CANDIDATES + len(exclude)):
        pid = int(matrix.passage_ids[i])
        if pid in exclude:
            continue
        out.hits.append((pid, float(scores[i])))
        if len(out.hits) >= SEMANTIC_CANDIDATES:
            break
    out.matrix = matrix
    return out


# ---------------------------------------------------------------- retrieve
@dataclass
class _Found:
    """What the database said about a scene, before any ranking."""

    words: list[str]
    standing: set[str]
    library: reads.Sources
    lexical: list[tuple[int, float]]  # (passage id, bm25), best first
    evidence: dict[int, frozenset[int]]
    sem: _Semantic
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

    def candidates(self, per_path: int | None = None) -> list[int]:
        """Every path's candidates (each first-stage path's best `per_path`,
        then the second model's scan), lexical first, each once."""
        return list(dict.fromkeys([pid for pid, _ in self.lexical[:per_path]]
                                  + [pid for pid, _ in self.sem.hits[:per_path]] + self.scan))

    @property
    def staged(self) -> bool:
        """Whether the second stage judged this turn (else the first stage did)."""
        return self.second is not None and self.second.used


def _search(db: Database, campaign_id: int, query_text: str, embedder, query_vector, exclude: frozenset[int],
            standing: Iterable[str], stage=None) -> _Found:
    """Both candidate paths and absolute admission, in one read transaction."""
    words = fts.terms(query_text)[: fts.MAX_TERMS]
    parts = query_parts(query_text)
    _second_query_ahead(db, campaign_id, stage, parts)
    with db.reading() as s:
        library = reads.sources(s, campaign_id)
        pool = [(pid, sc) for pid, sc in fts.search(s, campaign_id, words, LEXICAL_POOL + len(exclude))
                if pid not in exclude][:LEXICAL_POOL]
        lists = _scoped_postings(s, words, library.live) if pool else _Lists()
        found = _Found(
            words=words, standing=set(fts.terms(library.protagonist)).union(*(fts.terms(x) for x in standing)),
            library=library, lexical=pool,
            evidence=fts.evidence(s, words, [pid for pid, _ in pool], lists),
            sem=_semantic(s, db, campaign_id, library.live, parts, embedder, query_vector, exclude),
            always=[i for i in reads.always_ids(s, library.always) if i not in exclude],
        )
        if pool:
            frequencies = [len(ids) for ids in lists]
            found.weights = weigh(frequencies, len(lists.live), words, found.standing)
            lead = _lead_words(parts, words)
            if lead is not None:
                found.lead = weigh(frequencies, len(lists.live), words, found.standing, only=lead)
            found.strength, found.lead_strength = _strengths(s, campaign_id, found)
            order = {pid: i for i, (pid, _) in enumerate(pool)}
            found.lexical = sorted(pool, key=lambda c: (-found.strength[c[0]], order[c[0]]))[:LEXICAL_CANDIDATES]
            found.strength = {pid: found.strength[pid] for pid, _ in found.lexical}
        found.admitted_lex = {pid for pid, _ in found.lexical if _lexically_admitted(found, pid)}
        found.admitted_sem = {pid for pid, cos in found.sem.hits if semantic_admits(cos, found.sem.floor)}
        if stage is not None:
            _second(s, db, campaign_id, found, parts, stage, exclude)
            if found.staged:
                return found
        wanted = found.admitted_lex | found.admitted_sem | set(found.always)
        found.loaded = _load(s, campaign_id, wanted) if wanted else {}
    return found


# (file, campaign, second model) -> whether that model judged the campaign's
# last turn: the next turn embeds its query ahead only then (see below).
_judged: dict[tuple[str, int, str], bool] = {}


def _judged_key(db: Database, campaign_id: int, stage) -> tuple[str, int, str]:
    return str(db.path), campaign_id, stage.model_id


def _second_query_ahead(db: Database, campaign_id: int, stage, parts: list[str]) -> None:
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
    wanted = parts[:stages.STAGE_PARTS]

    def embed():
        try:
            stage.query(wanted)
        except Exception:  # noqa: BLE001 - the turn's own call meets it and says so in the report
            pass

    threading.Thread(target=embed, name="second-stage-query", daemon=True).start()


def _first_cosines(found: _Found, ids: Iterable[int]) -> dict[int, float]:
    """The first model's cosine of each passage (its best against any part
    of the scene), for candidates whichever path found them."""
    if not found.sem.used or not found.sem.queries:
        return {}
    out = {}
    for pid, v in found.sem.vectors_of(ids).items():
        out[pid] = max(float(v @ q) / max(float(np.linalg.norm(q)), 1e-12) for q in found.sem.queries)
    return out


def _features(found: _Found, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
    """What the fused second stage reads beside its own score: the first
    model's cosine and the lexical evidence over the scene's bar."""
    cosine = _first_cosines(found, ids)
    required = found.weights.required if found.lexical else 0.0
    return {pid: (cosine.get(pid, 0.0), stages.evidence_feature(found.strength.get(pid, 0.0), required))
            for pid in ids}


def _second(session, db: Database, campaign_id: int, found: _Found, parts: list[str], stage,
            exclude: Collection[int] = frozenset()) -> None:
    """Score every path's candidates with the second stage; when it judged
    them, its floor alone admits (see `second_stage`). A stage with stored
    vectors adds its own best of the whole library as a third path, once
    they are all computed."""
    query = None  # the scene's second-stage vectors, embedded once when the scan needs them first
    if getattr(stage, "needs_vectors", False) and stages.SCAN_CANDIDATES and parts:
        try:
            query = stage.query(parts[:stages.STAGE_PARTS])
            found.scan = stage.scan(session, db, campaign_id, found.library.live, query, stages.SCAN_CANDIDATES,
                                    frozenset(exclude))
        except Exception:  # rescore below meets the same failure and says it in the report
            query, found.scan = None, []
    candidates = found.candidates(stages.STAGE_CANDIDATES)
    pool = _load(session, campaign_id, set(candidates) | set(found.always))
    ranked = [pool[pid] for pid in candidates if pid in pool]
    found.second = rescore(stage, session, parts, [(r.passage_id, r.content_hash, index_line(r.heading, r.text))
                                                   for r in ranked],
                           first_model=found.sem.model if found.sem.used else None,
                           features=_features(found, [r.passage_id for r in ranked]), query=query)
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
    out = _Lists(ids & live for ids in fts.postings(session, words))
    out.live = live
    return out


def _lead_words(parts: Sequence[str], words: Sequence[str]) -> frozenset[int] | None:
    """Indexes of the query words in its newest paragraph (the reader's line
    and the state), when the query has other paragraphs too."""
    if len(parts) < 2:
        return None
    newest = set(fts.terms(parts[0]))
    return frozenset(i for i, w in enumerate(words) if w in newest)


def _strengths(session, campaign_id: int, found: _Found) -> tuple[dict[int, float], dict[int, float]]:
    """Lexical evidence of each candidate (see `admission`): its words'
    weights, doubled where its heading names them; against the whole query
    (the candidate's strength: the best of the two) and against its newest
    paragraph alone."""
    headings = reads.headings(session, campaign_id, [pid for pid, _ in found.lexical])
    whole, lead = {}, {}
    for pid, _ in found.lexical:
        matched = found.evidence.get(pid)
        named = fts.in_heading(headings.get(pid, ""), found.words, matched or ())
        whole[pid] = lexical_evidence(matched, found.weights, named)
        if found.lead is not None:
            lead[pid] = lexical_evidence(matched, found.lead, named)
            whole[pid] = max(whole[pid], lead[pid])
    return whole, lead


def _lexically_admitted(found: _Found, pid: int) -> bool:
    """By the whole scene's bar, or by the newest paragraph's own (the scene's
    other story raises the whole bar; the reader's line is still a scene)."""
    if found.lead is not None and lexical_admits(found.lead_strength.get(pid, 0.0), found.lead):
        return True
    return lexical_admits(found.strength.get(pid, 0.0), found.weights)


def _facts(found: _Found, query_text: str) -> dict:
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
        "knowledge_share": KNOWLEDGE_SHARE, "always_share": ALWAYS_SHARE,
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


def retrieve(db: Database, campaign_id: int, query_text: str, *, embedder, budget_tokens: int,
             context_tokens: int | None = None, exclude: Collection[int] = (), standing: Iterable[str] = (),
             query_vector: np.ndarray | None = None, lore: Sequence[Retrieved] = (),
             lore_facts: Sequence[dict] = (), second_stage=None) -> Selection:
    """The imported knowledge for a scene.

    `query_text` is the scene (see `scene_query`). `budget_tokens` is the
    elastic budget: what remains after protected context and the reply;
    retrieved passages take at most KNOWLEDGE_SHARE of it. `context_tokens`
    is the whole effective budget (default: `budget_tokens`); always-in-force
    Canon takes at most ALWAYS_SHARE of it. `exclude` holds passage ids to
    leave out. `standing` holds names that are in every scene (cast, places);
    the campaign's protagonist is added. `query_vector`, if given, must come
    from `embedder`'s model and replaces the query embedding call. `lore`
    holds story cards that fired by their keys (`engine.cards`), priced under
    the same budget: named outright by the scene, they go ahead of passages
    found by search, as keyword lore does in every peer tool; `lore_facts`
    is their provenance for the report. `second_stage` (see `second_stage`;
    None: first stage only) scores both paths' candidates again; its
    passage vectors are computed ahead (`stage_vectors`), and while some
    candidate has none yet the turn keeps the first stage and says so. A
    background stage starts that computation; a turn never waits for it.
    """
    found = _search(db, campaign_id, query_text, embedder, query_vector, frozenset(int(i) for i in exclude),
                    standing, second_stage)
    if found.second is not None:
        _judged[_judged_key(db, campaign_id, second_stage)] = found.staged
    if found.second is not None and not found.staged and second_stage.needs_vectors and second_stage.background:
        from . import stage_vectors

        stage_vectors.start(db, campaign_id, second_stage.embedder, progress=False)
    over_cap: list[Retrieved] = []
    if found.staged and found.second.fusion is not None:
        fusion = found.second.fusion
        strong, weak = cut(rank(normalise_second(_scored(found), scale=0.0)), share=fusion.cut)
        strong, over_cap = _capped(strong, fusion.cap)
    elif found.staged:
        strong, weak = cut(rank(normalise_second(_scored(found))), second=True)
    else:
        strong, weak = cut(rank(normalise(_scored(found))))
    kept, suppressed = suppress(strong, found.sem.vectors_of(found.loaded))
    kept = [*lore, *kept]
    whole = context_tokens if context_tokens is not None else budget_tokens
    allotment = allot(kept, knowledge_tokens=int(max(0, budget_tokens) * KNOWLEDGE_SHARE),
                      always_tokens=int(max(0, whole) * ALWAYS_SHARE))
    facts = {**_facts(found, query_text), "below_cut": [p.record() for p in weak],
             "over_cap": [p.record() for p in over_cap], "cards_fired": list(lore_facts)}
    return _assemble(tuple(kept), tuple(suppressed), allotment, found.library.enabled > 0 or bool(lore),
                     found.library.hidden, facts)


def _capped(ranked: Sequence[Retrieved], cap: int) -> tuple[list[Retrieved], list[Retrieved]]:
    """(kept, over the cap): at most `cap` retrieved passages, best first;
    always-in-force ones are not counted."""
    kept, over, n = [], [], 0
    for r in ranked:
        if r.always or n < cap:
            kept.append(r)
            n += not r.always
        else:
            over.append(r)
    return kept, over


def _scored(found: _Found) -> list[Retrieved]:
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


def _assemble(candidates: tuple[Retrieved, ...], suppressed: tuple[Retrieved, ...], allotment: Allotment,
              has_sources: bool, hidden: bool, facts: dict) -> Selection:
    static = static_sections(has_sources, hidden, allotment.always)
    volatile = volatile_sections(allotment.chosen)
    report = _report(facts, allotment, suppressed, static, volatile)
    return Selection(allotment.always + allotment.chosen, report, candidates, suppressed, has_sources, hidden,
                     facts)


def _used(p: Retrieved) -> dict:
    rendered = block(p)
    return {**p.record(), "text": p.text, "rendered": rendered, "prompt_tokens": tokens.count(rendered)}


def _report(facts: dict, a: Allotment, suppressed: Iterable[Retrieved], static: list, volatile: list) -> dict:
    protected = sum(tokens.count(t) + tokens.count(SEPARATOR) for _, t in static)
    used = [_used(p) for p in a.always + a.chosen]
    report = {
        **facts,
        "used": used,
        "dropped": [{**p.record(), "reason": why} for p, why in a.dropped],
        "suppressed": [p.record() for p in suppressed],
        "sections": [{"name": n, "part": "system", "tokens": tokens.count(t)} for n, t in static]
        + [{"name": n, "part": "story", "tokens": tokens.count(t)} for n, t in volatile],
        "budget": {"knowledge_tokens": a.knowledge_tokens, "always_tokens": a.always_tokens},
        "spent": a.spent,
        "always_spent": a.always_spent,
        "protected_tokens": protected,
    }
    report["summary"] = _summary(report)
    return report


def _summary(r: dict) -> str:
    """The report in one paragraph of words."""
    cards = r.get("cards_fired") or []
    fired = (f"{len(cards)} story card(s) fired by their keys: "
             + ", ".join(f"{c['title']} ({c['found_in']}: {c['key'] or 'always'})" for c in cards[:8]) + ". ") \
        if cards else ""
    if not r["sources"]:
        return fired + "The campaign has no enabled knowledge sources."
    found = [u["found_by"] for u in r["used"] if u["passage_id"] > 0]
    kinds = ", ".join(f"{found.count(k)} {k}" for k in ("always", "both", "lexical", "semantic") if k in found)
    text = fired + (f"{len(found)} passage(s) used ({kinds})" if found else "No passage used") + (
        f" of {r['generated']} candidate(s) searched; {r['rejected']} had no evidence"
        f", {len(r.get('below_cut', []))} scored far below the best"
        + (f", {len(r['over_cap'])} were past the admitted-count cap" if r.get("over_cap") else "") +
        f", {len(r['suppressed'])} repeated a better one, {len(r['dropped'])} did not fit the budget. "
        f"Retrieved text cost {r['spent']} of {r['budget']['knowledge_tokens']} tokens; the framing and "
        f"always-in-force Canon {r['protected_tokens']}."
    )
    if r["semantic_used"]:
        text += f" Semantic path: {r['embedding_model']} at floor {r['semantic_floor']}."
    elif r["semantic_note"]:
        text += " " + r["semantic_note"]
    if r.get("second_stage_used"):
        text += (f" Second stage: {r['second_stage']} re-scored {r['second_stage_scored']} candidate(s) and "
                 f"admitted at floor {r['second_stage_floor']}.")
    elif r.get("second_stage") and r.get("second_stage_note"):
        text += " " + r["second_stage_note"]
    return text
