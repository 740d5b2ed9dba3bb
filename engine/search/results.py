"""What a search hands back: one record per passage, with its provenance, and
what a pass that computes vectors did."""
from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["EmbeddingPass", "Retrieved"]


@dataclass(frozen=True)
class Retrieved:
    """A passage that survived admission, with everything needed to show it,
    price it and explain afterwards why it was there.

    It is also the one candidate type: anything else that should compete for
    the knowledge budget (a story card whose key fired, say) is a Retrieved
    too. Ranking reads `evidence` and `cosine` (either may be None; see
    ranking.relevance), `classification` and `always`; the budget and the
    framing read `text`, `heading`, `filename` or `title`, `number` and
    `hidden`. Give it a `passage_id` no real passage has."""

    passage_id: int
    source_id: int
    title: str
    filename: str
    classification: str
    hidden: bool
    heading: str
    number: int  # 1-based position in its source, as shown in the label
    text: str
    tokens: int  # of the text alone
    always: bool = False  # always-in-force Canon: shown whether or not it matched
    admitted_by: str = ""  # lexical | semantic | both | "" (always-in-force, no evidence)
    lexical: float = 0.0  # lexical evidence on the cosine's scale (the tuning's evidence_scale)
    semantic: float = 0.0  # the cosine, when one was computed (admitted by that path or not)
    cosine: float | None = None  # the raw cosine, when one was computed
    bm25: float | None = None  # the raw (negated) bm25, when the passage was a lexical candidate
    evidence: float | None = None  # rarity-weighted lexical evidence (see admission), when a candidate
    second: float | None = None  # the second stage's score, when it judged the turn (see second_stage)
    score: float = 0.0  # relevance x class weight
    matched_terms: tuple[str, ...] = ()
    content_hash: str = ""
    cost: int = 0  # tokens its framed block costs in the prompt
    duplicate_of: int | None = None

    @property
    def found_by(self) -> str:
        """How it got into the prompt: always, both, lexical or semantic."""
        return "always" if self.always else (self.admitted_by or "lexical")

    def with_(self, **changes) -> Retrieved:
        return replace(self, **changes)

    def record(self) -> dict:
        """JSON-ready provenance (no text): what the inspector and the turn record keep."""
        return {
            "passage_id": self.passage_id, "source_id": self.source_id, "title": self.title,
            "filename": self.filename, "classification": self.classification,
            "visibility": "hidden" if self.hidden else "normal", "heading": self.heading,
            "passage": self.number, "tokens": self.tokens, "cost": self.cost, "always": self.always,
            "found_by": self.found_by, "admitted_by": self.admitted_by,
            "lexical": round(self.lexical, 4), "semantic": round(self.semantic, 4),
            "cosine": None if self.cosine is None else round(self.cosine, 4),
            "bm25": None if self.bm25 is None else round(self.bm25, 4),
            "evidence": None if self.evidence is None else round(self.evidence, 3),
            "second": None if self.second is None else round(self.second, 4),
            "score": round(self.score, 4), "matched_terms": list(self.matched_terms),
            **({"duplicate_of": self.duplicate_of} if self.duplicate_of is not None else {}),
        }


@dataclass(frozen=True)
class EmbeddingPass:
    """What one pass did: vectors written, still pending, and why it stopped early."""

    model: str
    embedded: int
    remaining: int
    error: str = ""

    @property
    def words(self) -> str:
        if self.error:
            return (f"Embedding with {self.model or 'the embedder'} failed after {self.embedded} passage(s): "
                    f"{self.error.rstrip('.')}. "
                    f"{self.remaining} remain pending; lexical search is unaffected.")
        if self.remaining:
            return f"Embedded {self.embedded} passage(s) with {self.model}; {self.remaining} remain pending."
        return f"Embedded {self.embedded} passage(s) with {self.model}; none pending."
