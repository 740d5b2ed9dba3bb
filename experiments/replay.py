"""Replay: the reader's inputs of a recorded campaign, played again elsewhere.

A replay takes the acts, directions and continues on a campaign's played path
and plays them, one turn at a time, into a fresh workbench file with another
narrator or other settings. The original is only read. What comes back is one
row per turn joining the two runs, so a question like "what did a 4,096 budget
change?" is a column difference rather than an afternoon of reading.

A `Recording` is the original taken out of its database (plain data, picklable)
so the same recording can be shipped to Dask workers on other machines.
"""
from __future__ import annotations

import importlib
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from engine import Campaign, NotAllowed, Workbench, WorkbenchError
from engine.context import tokens
from engine.narrative import count_leaks
from engine.store import CampaignRow

from .retrying import until_accepted

__all__ = ["FACT_COLUMNS", "Factory", "Recording", "Step", "facts", "join", "move", "play", "record", "replay"]

# Campaign columns that shape the prompt; copied so a replay is shown the same standing text.
BRIEF_FIELDS = ("title", "premise", "protagonist", "ai_instructions", "authors_note", "narration_length", "canon")
# Settings that belong to the machine or the narrator choice, never copied from another file.
LOCAL_SETTINGS = ("narrator", "embedder")
SECTIONS = ("tok_system", "tok_knowledge", "tok_history", "tok_summary", "tok_memories", "tok_state", "tok_hints")
# What changes from one turn to the next sits after the history: the input and these. The summary and
# memories a prompt held in place from the one before (its report's "held") are not new: `held_tokens`.
TAIL_SECTIONS = ("tok_summary", "tok_knowledge", "tok_memories", "tok_state", "tok_hints")
FACT_COLUMNS = [
    "turn", "node_id", "mode", "input", "text", "recorded", "words", "reply_tokens", *SECTIONS,
    "estimate_tokens", "prompt_tokens", "processed_tokens", "cached_tokens", "new_tokens", "new_server_tokens",
    "held_tokens", "reply_input_tokens", "reply_input_server_tokens", "generated_tokens",
    "generated_input_server_tokens",
    "prompt_ms",
    "generation_ms", "ttft_ms", "total_ms", "leaks", "events_accepted", "events_refused", "memories_recalled",
    "knowledge_admitted", "accounting", "floor_depth", "history_included", "refusals", "refusal",
]


@dataclass(frozen=True)
class Step:
    """One reader move on the played path and the narration it got."""

    mode: str  # act | direct | continue
    text: str
    narration: str


@dataclass(frozen=True)
class Recording:
    """A campaign taken out of its file: its standing text, its settings, its
    knowledge sources, its moves and the facts of every original turn."""

    brief: dict
    opening: str
    settings: dict
    steps: tuple[Step, ...]
    knowledge: tuple[dict, ...] = ()
    original: pd.DataFrame = field(default_factory=pd.DataFrame, compare=False)

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Factory:
    """A narrator or embedder named by import path ("package.module:Class") and
    built where it runs: a model handle cannot be pickled to a Dask worker, a
    name can. `path` is put on sys.path first (for classes outside the package,
    such as test narrators)."""

    target: str
    kwargs: dict = field(default_factory=dict)
    path: str | None = None

    def build(self):
        if self.path and self.path not in sys.path:
            sys.path.insert(0, self.path)
        module, _, name = self.target.partition(":")
        if not name:
            raise WorkbenchError(f"A factory target is 'module:Name', e.g. 'narrators:CountingNarrator', not {self.target!r}.")
        try:
            return getattr(importlib.import_module(module), name)(**self.kwargs)
        except (ImportError, AttributeError) as exc:
            raise WorkbenchError(f"Could not build {self.target!r} ({exc}); is its folder on sys.path or in `path`?") from exc


# ---------------------------------------------------------------- reading the original
def _brief(camp: Campaign) -> dict:
    with camp.workbench.db.reading() as s:
        row = s.get(CampaignRow, camp.id)
        return {name: getattr(row, name) for name in BRIEF_FIELDS}


def _knowledge(camp: Campaign) -> tuple[dict, ...]:
    from sqlalchemy import select

    from engine.store.knowledge_tables import KnowledgeSourceRow

    with camp.workbench.db.reading() as s:
        rows = s.scalars(select(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == camp.id)
                         .order_by(KnowledgeSourceRow.id)).all()
        return tuple({"name": r.original_filename, "data": r.content, "classification": r.classification,
                      "title": r.title, "visibility": r.visibility, "always_include": r.always_include,
                      "enabled": r.enabled} for r in rows)


def _steps(camp: Campaign) -> tuple[tuple[Step, ...], str]:
    """The moves on the played path, and the opening. A narration preceded by
    another narration (or the opening) was a continue."""
    history = camp.history()
    opening = history[0].text if history and history[0].kind == "start" else ""
    steps, before = [], None
    for entry in history:
        if entry.kind == "narrator":
            mode = {"player": "act", "direction": "direct"}.get(before.kind if before else "", "continue")
            steps.append(Step(mode, before.text if mode != "continue" else "", entry.text))
        before = entry
    return tuple(steps), opening


def record(camp: Campaign) -> Recording:
    """Everything a replay needs from `camp`, read once and detached from its file."""
    steps, opening = _steps(camp)
    if not steps:
        raise NotAllowed(f"Campaign {camp.title!r} has no narrated turn on its played path: there is nothing to replay.")
    # Stored settings only: a private field (Settings._following) is not one wb.configure takes.
    settings = {k: v for k, v in asdict(camp.workbench.settings).items()
                if k not in LOCAL_SETTINGS and not k.startswith("_")}
    return Recording(_brief(camp), opening, settings, steps, _knowledge(camp), facts(camp))


# ---------------------------------------------------------------- the facts of a turn
def _report_facts(turn) -> dict:
    """Every field read from a stored turn, in one place, through the record's typed report."""
    report, usage, timings = turn.report, turn.usage or {}, turn.timings or {}
    narrative = report.narrative
    total = sum(v for v in (timings.get("prepare_ms"), timings.get("generate_ms")) if v is not None)
    return {
        "processed_tokens": usage.get("processed_tokens"), "cached_tokens": usage.get("cached_tokens"),
        "prompt_ms": usage.get("prompt_ms"), "generation_ms": usage.get("generation_ms"),
        "generated_tokens": usage.get("completion_tokens"),
        "ttft_ms": None, "total_ms": total or None,
        "events_accepted": narrative.accepted, "events_refused": len(narrative.rejected),
        "memories_recalled": len(report.used("memories")),
        "knowledge_admitted": len(report.used("knowledge")),
        "held_tokens": sum(s.tokens for s in report.sections if s.name in ("story_summary", "memories"))
        if (report.get("held") or {}).get("held") else 0,
    }


def facts(camp: Campaign, *, recorded: int = 0, ttft: dict | None = None) -> pd.DataFrame:
    """One row per narrated turn on `camp`'s played path: what the prompt was
    made of, what the server processed and served from cache, times, and what
    the turn did to the story. The first `recorded` turns were copied, not narrated."""
    rows = []
    for row in camp.records().to_dict("records"):
        turn = camp.turn(row["node_id"])
        stored = _report_facts(turn)
        if ttft and row["node_id"] in ttft:
            stored["ttft_ms"] = ttft[row["node_id"]]
        rows.append({**{k: row.get(k) for k in ("turn", "node_id", "mode", "input", "text", "words", *SECTIONS,
                                                 "estimate_tokens", "prompt_tokens", "accounting", "floor_depth",
                                                 "history_included")},
                     **stored, "recorded": row["turn"] <= recorded, "reply_tokens": tokens.count(row["text"] or ""),
                     "leaks": count_leaks([(row["node_id"], row["text"])])["leaking"], "refusals": 0, "refusal": ""})
    frame = pd.DataFrame(rows, columns=FACT_COLUMNS)
    # New content a server must read whatever it caches: the last reply, this input and the volatile tail.
    frame["input_tokens"] = _input_tokens(frame)
    frame["reply_input_tokens"] = (frame["reply_tokens"].shift(1).fillna(0) + frame["input_tokens"]).astype(int)
    frame["new_tokens"] = (frame["reply_input_tokens"] + frame[list(TAIL_SECTIONS)].fillna(0).sum(axis=1)
                           - frame["held_tokens"].fillna(0)).astype(int)
    frame["new_server_tokens"] = _in_server_tokens(frame)
    frame["reply_input_server_tokens"] = _in_server_tokens(frame, "reply_input_tokens")
    # The same with the last reply as the narrator wrote it (its completion tokens, already the model's
    # count): a stored reply is shorter, cut at a sentence end and without its state block.
    generated = pd.to_numeric(frame["generated_tokens"], errors="coerce").shift(1)
    frame["generated_input_server_tokens"] = generated + _in_server_tokens(frame, "input_tokens")
    return frame.drop(columns="input_tokens")


def _in_server_tokens(frame: pd.DataFrame, column: str = "new_tokens") -> pd.Series:
    """New content in the server's own tokens, so it can be set against what the
    server processed: our count is cl100k, and a small model's tokenizer splits
    the same text into more pieces (SmolLM2 about 1.2x here). Scaled by each
    turn's measured prompt-to-estimate ratio; unknown where the server gave no count."""
    prompt = pd.to_numeric(frame["prompt_tokens"], errors="coerce")
    estimate = pd.to_numeric(frame["estimate_tokens"], errors="coerce")
    ratio = (prompt / estimate).where(estimate > 0)
    return (frame[column] * ratio).round()


def _input_tokens(frame: pd.DataFrame) -> pd.Series:
    return frame["input"].fillna("").map(lambda text: tokens.count(text) if text else 0)


# ---------------------------------------------------------------- playing
class _Recorded:
    """Narrates the first `keep` turns with the original's own words, then hands
    over: every cell of a grid starts from the same saturated window without
    spending minutes generating it. Memory and summary tasks go to the inner narrator."""

    def __init__(self, inner, narrations: list[str], keep: int):
        self.inner, self.narrations, self.keep, self.calls = inner, narrations, keep, 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def context_window(self):
        return self.inner.context_window()

    def peek_window(self):
        peek = getattr(self.inner, "peek_window", None)
        return peek() if peek else self.inner.context_window()

    def execute(self, prompt):
        if prompt.task != "narrate" or self.calls >= self.keep:
            yield from self.inner.execute(prompt)
            return
        from engine.providers import Text, Usage

        self.calls += 1
        yield Text(self.narrations[self.calls - 1])
        yield Usage()


def _narrator(narrator):
    """A narrator object, a Factory built here, or a settings name ("local", "endpoint")."""
    return narrator.build() if isinstance(narrator, Factory) else narrator


def _fresh(db_path: Path) -> Workbench:
    if db_path.exists():
        raise WorkbenchError(f"{db_path} already exists; a replay writes a fresh file and never reuses one.")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return Workbench.open(db_path, background=False)


def _setup(recording: Recording, wb: Workbench, narrator, embedder, keep: int, settings: dict) -> Campaign:
    wb.configure(narrator=_narrator(narrator), embedder=_narrator(embedder) if embedder is not None else "none",
                 **{**recording.settings, **settings})
    if keep:
        wb.configure(narrator=_Recorded(wb.narrator, [s.narration for s in recording.steps], keep))
    brief = recording.brief
    camp = wb.new_campaign(brief["title"], brief["premise"], brief["protagonist"], opening=recording.opening,
                           ai_instructions=brief["ai_instructions"], authors_note=brief["authors_note"])
    with wb.db.writing() as s:
        row = s.get(CampaignRow, camp.id)
        row.canon, row.narration_length = brief["canon"] or {}, brief["narration_length"] or ""
    for source in recording.knowledge:
        added = camp.knowledge.add(source["name"], source["data"], classification=source["classification"],
                                   title=source["title"], visibility=source["visibility"],
                                   always_include=source["always_include"], allow_duplicate=True)
        if not source["enabled"]:
            camp.knowledge.disable(added["id"])
    return camp


def _stamp(first: list):
    """An on_text callback noting when the first words arrived."""
    return lambda _text: first or first.append(time.perf_counter())


def move(camp: Campaign, step: Step, on_text=None):
    """The call that plays `step` on `camp`, not yet made: a refused turn is tried by calling it again."""
    if step.mode == "act":
        return lambda: camp.act(step.text, on_text=on_text)
    if step.mode == "direct":
        return lambda: camp.direct(step.text, on_text=on_text)
    return lambda: camp.continue_story(on_text=on_text)


def play(recording: Recording, db_path: str | Path, *, narrator: Any = None, embedder: Any = None,
         keep_first: int = 0, progress: bool = True, label: str = "replay", **settings) -> pd.DataFrame:
    """Play `recording`'s moves into a fresh workbench file at `db_path`; the
    replay's own facts, one row per turn. `embedder` defaults to none (fast and
    deterministic, but no memory recall or semantic knowledge): pass "local" or an
    embedder object (or Factory) to measure those. A turn the engine refuses is tried
    again (as a reader presses Retry); one refused every time keeps its row,
    with the refusal in words, and the replay goes on."""
    wb = _fresh(Path(db_path))
    try:
        narrator = narrator if narrator is not None else "local"
        keep = max(0, min(keep_first, len(recording)))
        camp = _setup(recording, wb, narrator, embedder, keep, settings)
        done, failed = {}, []
        for number, step in enumerate(tqdm(recording.steps, desc=label, disable=not progress, leave=False), 1):
            started, first, refused = time.perf_counter(), [], []
            turn = until_accepted(move(camp, step, _stamp(first)), refused=refused, required=False)
            if turn is None:
                failed.append({"turn": number, "mode": step.mode, "input": step.text, "refusals": len(refused),
                               "refusal": refused[-1] if refused else ""})
            else:
                done[turn.id] = (number, round((first[0] - started) * 1000, 2) if first else None, len(refused))
        frame = _numbered(facts(camp, recorded=keep, ttft={k: v[1] for k, v in done.items()}), done, failed)
        frame.attrs["db_path"] = str(db_path)
        return frame
    finally:
        wb.close()


def _numbered(frame: pd.DataFrame, done: dict, failed: list[dict]) -> pd.DataFrame:
    """Rows numbered by the recording's step, so a turn the engine refused keeps
    its place (a row with the refusal) and the later turns still line up."""
    frame["turn"] = frame["node_id"].map(lambda n: done[n][0])
    frame["refusals"] = frame["node_id"].map(lambda n: done[n][2])
    if failed:
        frame = pd.concat([frame, pd.DataFrame(failed).reindex(columns=FACT_COLUMNS)], ignore_index=True)
    return frame.sort_values("turn", ignore_index=True)


def join(original: pd.DataFrame, replayed: pd.DataFrame) -> pd.DataFrame:
    """Turn by turn, original beside replay (`_original` / `_replay` suffixes)."""
    shared = original[["turn", "mode", "input"]]
    left = original.drop(columns=["mode", "input"]).add_suffix("_original").rename(columns={"turn_original": "turn"})
    right = replayed.drop(columns=["mode", "input"]).add_suffix("_replay").rename(columns={"turn_replay": "turn"})
    return shared.merge(left, on="turn").merge(right, on="turn", how="left")


def replay(source: Campaign | Recording, db_path: str | Path, **options) -> pd.DataFrame:
    """`replay(camp, "replay.db", narrator=..., trim_fraction=0)`: the original's
    moves played again into a fresh file; per turn, original joined with replay.
    Options are `play`'s (narrator, embedder, keep_first, progress) and any setting."""
    recording = source if isinstance(source, Recording) else record(source)
    frame = join(recording.original, play(recording, db_path, **options))
    frame.attrs["db_path"] = str(db_path)
    return frame
