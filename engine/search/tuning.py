"""Every number that retrieval and recall were tuned on, in one value.

Why a value and not module constants: an experiment that sweeps a cut or a
candidate count must be able to say exactly what it ran with, and two runs
side by side (a notebook's tuning half and held-out half, a turn and its
replay) must not share a module that one of them changed. So a search takes
a `Tuning`, a setting or an experiment makes a changed copy with
`dataclasses.replace`, and the turn's report records the one it ran with
(`Tuning.record`).

Each default carries the measurement it was chosen on, beside it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import WorkbenchError

__all__ = ["DEFAULT", "Tuning"]


@dataclass(frozen=True)
class Tuning:
    # ------------------------------------------------ knowledge: candidates
    # Per-path caps before the merge: enough for any budget the share allows
    # (a third of 32k tokens is ~40 passages of 256), small enough to load cheaply.
    lexical_candidates: int = 40
    # bm25's best this many are re-scored by rarity-weighted evidence (see
    # `admission`) before the lexical cap: bm25 over one text column cannot tell
    # a passage a word names in its heading from one of the hundreds of monster
    # stat blocks that mention it ("poisoned"). Measured on the retrieval
    # evaluation: with bm25's top 40, 57 of 72 targeted scenes had a relevant
    # candidate at all; with the top 300 re-scored, 72 of 72.
    lexical_pool: int = 300
    semantic_candidates: int = 40
    # Vectors scored per turn. There is no approximate index; this is the honest
    # bound in its place (4,000 x 384 dims score in 0.25 ms; the whole retrieval
    # measured ~10 ms warm), and going past it is reported as scan_truncated.
    semantic_scan_limit: int = 4000
    # A long scene yields hundreds of words; the first 30 (state first, then the
    # newest story, newest text first) are the query. Measured with the
    # evaluation's scenes played after three turns of other story: at 60 terms
    # the reader's line found its passage for 24 of 72 scenes, at 30 for 30-32,
    # with the lexical bar growing with the terms; at 20 the everyday scenes let
    # in 5 of 42 against 1. A one-line scene has 5-15.
    max_terms: int = 30

    # ------------------------------------------------ knowledge: admission
    # A word in more than this share of the library's passages carries no
    # evidence. Measured on the evaluation library (3,119 passages): "save" is in
    # 26%, "check" and "roll" 10%, "holding" 6%, while words that name a rule
    # ("round" 4.4%, "prone" 3.8%, "grapple" 2.1%, "initiative" 1.2%) are under 5%.
    common_share: float = 0.05
    # A heading naming a word up to this common still counts it ("Bag of
    # Holding", 6%); "Intelligence Checks" (10%) admitted an everyday scene about
    # checking the weather forecast, so "check" does not.
    named_common_share: float = 0.08
    # A heading that names the word counts it this many times: a heading says
    # what a passage is about where body text only mentions things.
    heading_weight: float = 2.0
    # Evidence, in idf units (ln scale): with ~3,000 passages a word in one
    # passage weighs ~7.6, in 10 ~5.7, in 50 ~4.1, at the 5% cut ~3.0. Chosen on
    # the retrieval evaluation (72 targeted and 42 everyday scenes over a rules
    # reference, a novel and a setting wiki): share 0.6 capped at 14 left 1 of
    # 42 everyday scenes admitting anything (shares 0.3-0.5 let 10-18 through;
    # caps of 16 and more cost targeted scenes without removing it). The floor
    # is one word at the common cut: it changed nothing on the evaluation
    # between 0 and 10, and below it a lone word would be no evidence.
    query_share: float = 0.6
    lexical_min_evidence: float = 3.0
    lexical_max_required: float = 14.0
    # ... for a scene of up to this many weighed words; past it the cap grows in
    # proportion. After three turns of everyday story a fixed cap of 14 let
    # every one of 42 everyday scenes admit a passage on words like
    # crowded/window/talk/loudly (evidence 20-40). Growing from 10 words, 1 of 42
    # (from 12, 4; a fixed 28 cost 3 of 72 one-line scenes).
    cap_terms: int = 10
    # Rarity is measured against at least this many passages: a handful of
    # passages cannot show which words are common, and a small library is
    # specific anyway.
    min_library: int = 1000

    # ------------------------------------------------ knowledge: fusion and cut
    # Lexical evidence (idf units, admitted from ~9) to the cosine's scale.
    # Measured on the retrieval evaluation (72 targeted scenes, the relevant
    # passage among each scene's two best): 0.02 put it there for 47 scenes,
    # 0.05 for 42, reciprocal-rank fusion for 41-42, either path alone 36-38.
    evidence_scale: float = 0.02
    # Retrieved passages scoring under this share of the best are dropped.
    # Measured (same evaluation, MiniLM): 0.9 raised the precision of what was
    # admitted at 4,096 from 45% to 52% and at 16,384 from 25% to 47%, for one
    # targeted scene in 72 losing its answer; 0.8 kept 37% at 16,384.
    relative_cut: float = 0.9
    # The same two when the second stage judged the turn (its score takes the
    # cosine's place). Chosen with the default relevance model (EmbeddingGemma's
    # int8 copy, its queries centred) on the retrieval evaluation's tuning half
    # (93 targeted, 41 everyday scenes), its best rows asked through the
    # engine: cut 0.7 with no evidence in the order found 60 scenes at 4,096
    # (42 % precise, one everyday scene), cut 0.5 60 (40 %); with 0.01 of the
    # evidence the sweep counted 60 at best against 62 without, so it was
    # not among them. Before the centring, cut 0.8 and 0.01 had been chosen
    # the same way.
    second_evidence_scale: float = 0.0
    second_cut: float = 0.7
    # Near-repeats: redundant pairs scored 0.938-0.996 under the reference's
    # embedding model, distinct ones 0.349-0.906. An identical passage scores
    # 1.0 under any model; near-copies are where the number matters.
    redundant_similarity: float = 0.93

    # ------------------------------------------------ knowledge: second stage
    # Candidates the second model judges: each path's best this many. 10 and 40
    # per path found the same tuning scenes at every floor, cut and cap swept
    # (32 of 54 at 4,096), so the cheaper; 5 per path had left 10 held-out
    # misses never judged at all.
    stage_candidates: int = 10
    # Query parts (paragraphs, newest first) the second model reads: each is one
    # more query to embed inside a turn's 150 ms. A cost bound, not an optimum.
    stage_parts: int = 2
    # The second model's own best of the whole live library as a third path
    # (read once its vectors cover the library); 0 is off. Chosen with the
    # default relevance model, EmbeddingGemma-300M's int8 copy, on its plain
    # score (retrieval_eval, tuning half, 93 targeted and 41 everyday scenes,
    # 4,096, cap 3, cut 0.8): each path's best 10 and its own best 10 found 55
    # scenes with no everyday scene admitting, each path's best 10 alone 53,
    # 40 alone 54. With all-mpnet-base-v2 it had added a relevant candidate
    # for 1 of 54 tuning scenes; with fp32 Gemma's fused score it found the
    # same 53 scenes as without (45 % precise against 46 %).
    scan_candidates: int = 10
    # At most this many passages admitted on the second model's plain score
    # (a fused model carries its own cap). Same choice: every one of the
    # engine's six best rows had cap 4 (60 tuning scenes at 4,096); the
    # budget, not the cap, bounds a 4,096 window (two or three passages).
    second_cap: int = 4
    # The second model's plain score admits this far above its calibrated
    # floor. The calibration scores everyday scenes against its pair set's
    # 281 passages; a whole library offers each of them more near misses
    # (centred int8 Gemma: the tuning half's second best everyday scene
    # reached 0.25 over 3,345 passages, 0.22 over the pair set's). Same
    # choice: 0.03 (0.23 -> 0.26), one everyday tuning scene admitting; 0.02
    # found as many scenes at 40 % precision; with no margin every row let
    # two everyday scenes or more in.
    second_floor_margin: float = 0.03

    # ------------------------------------------------ knowledge: budget
    # Retrieved passages take at most this share of the elastic budget (a third
    # holds several passages of the chunker's size and leaves most of the window
    # to the story); always-in-force Canon at most ALWAYS of the whole budget.
    knowledge_share: float = 0.33
    always_share: float = 0.20

    # ------------------------------------------------ floors
    # Floors by model id, over the calibration registry's; () reads the
    # registry alone. For an experiment sweeping a floor, never for play.
    floors: tuple[tuple[str, float], ...] = ()
    # The second stage's fused relevance model for the pair of models a turn
    # runs with, as (bias, second, cosine, evidence, floor, cut, cap); ()
    # reads the fitted registry (`second_stage.FUSIONS`). For an experiment
    # that fits its own on a tuning half.
    fusion: tuple[float, ...] = ()
    # False: the second model's plain score judges even where the registry has
    # a fused model for the pair (an experiment comparing the two).
    fused: bool = True

    # ------------------------------------------------ memory recall
    # The newest story nodes a recall reads beside the reader's line, within
    # this many tokens: the same window the knowledge query reads.
    recall_nodes: int = 4
    recall_tokens: int = 600
    # A story part's cosine counts this share of the reader's line; the share of
    # the reader's words (weighed by their rarity in the bank) a memory holds,
    # times lexical_weight, is added. Chosen on the tuning half of the recall
    # evaluation's probes (3 campaigns, 80 turns, 4,096): story 0.8 with lexical
    # 1.0 had the fact in the memories section for 71% of the tuning probes
    # (lexical 0.5: 67%, 0: 57%; story 1.0 no better).
    story_weight: float = 0.8
    lexical_weight: float = 1.0
    # Redundant memories, as for passages (same measurement).
    memory_redundant: float = 0.93
    # With a judge, this many of the first score's best memories are scored
    # again. The turn passes no judge: all-mpnet-base-v2 judging was measured
    # not to help (recall_eval's three 200-turn banks at 4,096, tuning half: 18
    # of 21 without, 18 judging 5, 16 judging 10 or 20).
    judged: int = 10
    # Memories and the summary together take at most this share of the room
    # the prompt's protected sections leave, the summary at most summary_share
    # of that. Uncapped, at a 2,048 budget five memories (~350 tokens) and the
    # summary (~330) left the history 17 tokens: the narrator saw no story.
    # Chosen on the tuning half of the recall evaluation (`caps`; 21 probes of
    # three 80-turn banks): at 2,048, shares 0.4 / 0.5 / 0.6 / none brought 100
    # / 100 / 95 / 86 % of the facts into the prompt with a median 488 / 384 /
    # 278 / 90 history tokens; at 4,096 all reached 100 %: the smallest share
    # that lost nothing, for the most story. The summary's share was not
    # varied: the memories are recalled for the input, so they get more.
    memory_share: float = 0.4
    summary_share: float = 0.4
    # ------------------------------------------------ memory recall: played lines
    # Played lines (and earlier summaries) offered beside the memories' top_k,
    # at most this many per prompt; 0 recalls memories only. Lines still in
    # the history window are never offered (the builder knows the window).
    recall_lines: int = 8
    # Units the recall returns for the builder to filter by the window and
    # pack into the share: at a 4,096 budget a conversation's history window
    # holds ~80 short lines, and the newest story lines score high against
    # the query's story parts, so the best 40 were often all inside it.
    recall_candidates: int = 120
    # Played lines scored in full per turn: those whose weighed cosine is
    # among the best this many, and every line holding a word of the
    # reader's line; no other line can reach the top. A cost bound: scoring
    # all 4,000 lines of a 2,000-turn story in Python took most of a recall.
    recall_pool: int = 400
    # Played lines scored by cosine per turn: the newest this many. An older
    # line is reached through its words (at most recall_pool of them, those
    # holding the reader's rarest words), and through the memories and
    # summaries that cover it. A cost bound in place of an approximate
    # index: every line's cosine against a turn's five query parts took
    # 0.6 ms per 2,000 lines measured alone on the 2-core machine (5.8 ms for
    # a 10,000-turn story's 20,000; 11 ms of a turn under cProfile), the one
    # part of a turn's recall that grew with the story once the rest was
    # kept between turns. 4,000 is a 2,000-turn story scored whole, as the
    # line-recall benchmark measures.
    recall_scan_lines: int = 4000
    # A played line or earlier summary scoring under this (best weighed cosine
    # plus the lexical share, 0-2) is not offered; memories have no floor.
    # Chosen on the tuning half of memory_eval (three 320-turn conversations,
    # 111 answerable questions whose evidence left a 4,096 window, memories
    # made from the lines): 0.0-0.7 all answered 95.5 %, 0.8 95.4 %; among
    # the equals 0.7 offered the fewest lines to unanswerable questions
    # (6.2 against 6.65).
    recall_floor: float = 0.7
    # ------------------------------------------------ memory recall: held in place
    # The summary and the recalled units a prompt shows are shown again,
    # unchanged and at the same place in the history, for up to this many
    # turns (0: chosen afresh every turn, after the input, as before), unless
    # the summary is rewritten or a unit leaves the story; beside them at most
    # `recall_fresh` of this turn's best other units, read after the input.
    # Why: the embedded narrator re-reads everything after the first token it
    # has not seen, and the recall changed 4-5 of its ~8 units every turn: on
    # the shipped campaign (45 narrated turns at 2,048, 64-token replies,
    # compare) it read a median 615 tokens a turn for 53 of reply and input,
    # and 178.5 with the memories held (36 of 44 turns held; 167.5 with one
    # unit of the turn's own). The summary is rewritten every 15 nodes (about
    # 7 turns), so a hold of 8 lets it, not the hold, renew the memories. Two
    # units of the turn's own: memory_eval's questions asked one after
    # another, each prompt holding the one before's memories, answered 95.5 %
    # held out (tuning half 95.5 %) with two, 91.7 % (92.7 %) with one,
    # against 96.3 % (95.5 %) choosing afresh for every question.
    recall_hold: int = 8
    recall_fresh: int = 2
    # When the units are chosen afresh under a hold, this share of their
    # room is left for the units the next turns add beside them; a best unit
    # that still does not fit renews the choice rather than being left out.
    # Measured on the shipped campaign played by its scripted passages (~110
    # tokens a line, 40 turns): 0.25 renewed the choice for that reason 6
    # times, 0.4 once; memory_eval's held-out answers 97.2 % at 0.25, 96.3 %
    # at 0.4 (tuning half 96.4 / 95.5 %).
    fresh_share: float = 0.4

    def __post_init__(self) -> None:
        wrong = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if f.name not in ("floors", "fusion", "fused") and (not isinstance(getattr(self, f.name), (int, float))
                                            or isinstance(getattr(self, f.name), bool)
                                            or getattr(self, f.name) < 0)]
        if wrong:
            raise WorkbenchError(f"A search tuning value must be a number of 0 or more: {', '.join(wrong)}. "
                                 "Make one with dataclasses.replace(engine.search.DEFAULT, name=value).")
        if not isinstance(self.fused, bool):
            raise WorkbenchError(f"A search tuning's fused is True or False, not {self.fused!r}.")
        object.__setattr__(self, "floors", tuple((str(m), float(v)) for m, v in dict(self.floors).items()))
        if self.fusion and len(self.fusion) != 7:
            raise WorkbenchError("A search tuning's fusion is (bias, second, cosine, evidence, floor, cut, cap), "
                                 f"seven numbers; {len(self.fusion)} were given.")
        object.__setattr__(self, "fusion", tuple(float(x) for x in self.fusion))

    def floor_override(self, model_id: str) -> float | None:
        return dict(self.floors).get(model_id)

    def changes(self) -> dict[str, Any]:
        """What differs from the defaults (a setting stores only this)."""
        base = asdict(DEFAULT)
        return {k: v for k, v in asdict(self).items() if v != base[k]}

    def record(self) -> dict[str, Any]:
        """What a turn's report keeps: the changes from the defaults and a
        digest of every value, so a run is identified exactly (the digest
        tells two tunings apart) without ~1.3 KB of numbers in every stored
        record (the whole value in each turn's knowledge and memory reports
        took a 1,000-turn campaign's file past 8 KB a turn)."""
        values = json.dumps(asdict(self), sort_keys=True, default=list)
        return {"changes": self.changes(), "sha256": hashlib.sha256(values.encode()).hexdigest()[:16]}

    @classmethod
    def from_changes(cls, changes: dict[str, Any] | None) -> Tuning:
        """A stored setting back into a value; names no version knows are a
        sentence, not a silent default."""
        changes = dict(changes or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise WorkbenchError(f"Unknown search tuning value(s) {', '.join(unknown)}: the known ones are "
                                 f"{', '.join(sorted(known))}.")
        if "floors" in changes and isinstance(changes["floors"], dict):
            changes["floors"] = tuple(changes["floors"].items())
        elif "floors" in changes:
            changes["floors"] = tuple(tuple(x) for x in changes["floors"])
        if "fusion" in changes:
            changes["fusion"] = tuple(changes["fusion"] or ())
        return replace(DEFAULT, **changes)


DEFAULT = Tuning()
