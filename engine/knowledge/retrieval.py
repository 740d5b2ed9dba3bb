"""Hybrid retrieval: which imported passages the narrator sees this turn.

The search layer finds and admits the candidates (`engine.search.passages`:
both paths, absolute admission, the second stage); here they are ranked
(`engine.search.fusion`), near-repeats set aside, and the survivors priced
under the knowledge budget (`allotment`) and framed. Every step is recorded
in the report, with the tuning it ran with, so a turn's
knowledge can be explained afterwards: what was searched, what was found and
how, what it cost, and what was set aside and why.

An embedder failure or a missing calibration never fails retrieval: it
narrows it to the lexical path and says so in `semantic_note`.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import html
from ..budget import tokens
from ..search import passages as search
from ..search.classes import CLASS_LABELS
from ..search.fusion import cut, normalise, normalise_second, rank, suppress
from ..search.results import Retrieved
from ..search.tuning import DEFAULT, Tuning
from ..store import Database
from .allotment import Allotment, allot
from .framing import SEPARATOR, block, static_sections, volatile_sections

__all__ = ["Selection", "retrieve"]


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
    tuning: Tuning = field(default=DEFAULT, repr=False)
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
                         self.facts, self.tuning)

    def system_sections(self, budget: int) -> list[tuple[str, str]]:
        """The knowledge rule and always-in-force Canon for a `budget`-token
        prompt (always-in-force takes at most the tuning's always_share of it)."""
        self._pricing["always_tokens"] = int(max(0, budget) * self.tuning.always_share)
        chosen = self.rebudget(knowledge_tokens=self.report["budget"]["knowledge_tokens"],
                               always_tokens=self._pricing["always_tokens"])
        return static_sections(self.has_sources, self.hidden_sources, chosen.always)

    def select(self, tokens_available: int) -> tuple[list[tuple[str, str]], dict]:
        """Retrieved sections within `tokens_available` (already the knowledge
        share), ascending authority, and the report of that choice."""
        always = self._pricing.get("always_tokens", self.report["budget"]["always_tokens"])
        chosen = self.rebudget(knowledge_tokens=tokens_available, always_tokens=always)
        return volatile_sections(chosen.retrieved), chosen.report

    def select_share(self, available: int) -> tuple[list[tuple[str, str]], dict]:
        """As `select`, within the tuning's knowledge share of `available`
        (what remains of the prompt after its protected context)."""
        return self.select(int(max(0, available) * self.tuning.knowledge_share))

    def __repr__(self) -> str:
        return f"<Selection: {self.report.get('summary', '')}>"

    def _repr_html_(self) -> str:
        rows = [(p.found_by, f"{CLASS_LABELS.get(p.classification, p.classification)}"
                 f"{' (narrator only)' if p.hidden else ''}", p.filename, p.heading, p.number, f"{p.score:.3f}", p.cost)
                for p in self.passages]
        header = ["found by", "class", "file", "heading", "passage", "score", "tokens"]
        return html.tag("div", html.tag("p", self.report.get("summary", ""))
                        + (html.table(rows, header=header) if rows else ""))


def retrieve(db: Database, campaign_id: int, query_text: str, *, embedder, budget_tokens: int,
             context_tokens: int | None = None, exclude: Collection[int] = (), standing: Iterable[str] = (),
             query_vector: np.ndarray | None = None, lore: Sequence[Retrieved] = (),
             lore_facts: Sequence[dict] = (), second_stage=None, tuning: Tuning = DEFAULT) -> Selection:
    """The imported knowledge for a scene.

    `query_text` is the scene (see `scene_query`). `budget_tokens` is the
    elastic budget: what remains after protected context and the reply;
    retrieved passages take at most `tuning.knowledge_share` of it.
    `context_tokens` is the whole effective budget (default: `budget_tokens`);
    always-in-force Canon takes at most `tuning.always_share` of it. `exclude`,
    `standing`, `query_vector` and `second_stage` are the search's (see
    `engine.search.passages.find`). `lore` holds story cards that fired by
    their keys (`engine.cards`), priced under the same budget: named outright
    by the scene, they go ahead of passages found by search, as keyword lore
    does in every peer tool; `lore_facts` is their provenance for the report.
    A second stage that still lacks passage vectors starts computing them in
    the background when it is a background stage; a turn never waits for it.
    """
    found = search.find(db, campaign_id, query_text, embedder=embedder, query_vector=query_vector, exclude=exclude,
                        standing=standing, stage=second_stage, tuning=tuning)
    if found.second is not None and not found.staged and second_stage.needs_vectors and second_stage.background:
        from ..search import stage_vectors

        stage_vectors.start(db, campaign_id, second_stage.embedder, progress=False)
    over_cap: list[Retrieved] = []
    if found.staged and found.second.fusion is not None:
        fusion = found.second.fusion
        strong, weak = cut(rank(normalise_second(search.scored(found), scale=0.0, tuning=tuning)),
                           share=fusion.cut, tuning=tuning)
        strong, over_cap = _capped(strong, fusion.cap)
    elif found.staged:
        strong, weak = cut(rank(normalise_second(search.scored(found), tuning=tuning)), second=True, tuning=tuning)
        if tuning.second_cap:
            strong, over_cap = _capped(strong, tuning.second_cap)
    else:
        strong, weak = cut(rank(normalise(search.scored(found), tuning)), tuning=tuning)
    kept, suppressed = suppress(strong, found.sem.vectors_of(found.loaded), tuning)
    kept = [*lore, *kept]
    whole = context_tokens if context_tokens is not None else budget_tokens
    allotment = allot(kept, knowledge_tokens=int(max(0, budget_tokens) * tuning.knowledge_share),
                      always_tokens=int(max(0, whole) * tuning.always_share))
    facts = {**search.facts(found, query_text), "below_cut": [p.record() for p in weak],
             "over_cap": [p.record() for p in over_cap], "cards_fired": list(lore_facts)}
    return _assemble(tuple(kept), tuple(suppressed), allotment, found.library.enabled > 0 or bool(lore),
                     found.library.hidden, facts, tuning)


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


def _assemble(candidates: tuple[Retrieved, ...], suppressed: tuple[Retrieved, ...], allotment: Allotment,
              has_sources: bool, hidden: bool, facts: dict, tuning: Tuning = DEFAULT) -> Selection:
    static = static_sections(has_sources, hidden, allotment.always)
    volatile = volatile_sections(allotment.chosen)
    report = _report(facts, allotment, suppressed, static, volatile)
    return Selection(allotment.always + allotment.chosen, report, candidates, suppressed, has_sources, hidden,
                     facts, tuning)


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
