"""Ablation: what did one section of a recorded prompt change?

For a recorded turn, the exact prompt it was shown is rebuilt from its stored
sections with one section removed or replaced, and narrated as many times as
asked, beside as many narrations of the unchanged prompt. Everything else in
the prompt is byte for byte what the turn was shown (the freed tokens are not
handed to history, as the builder would), so a difference in the replies can
only come from that section, and the spread of the unchanged samples says how
much of it is sampling noise. The story is never changed: the narrator is
called directly and nothing is written to the campaign's file. Results land in
a SQLite file the experiment owns (one row per narration).

    ab = ablate(camp, turn_id, remove=["knowledge", "memory:12"], replace={"summary": "..."}, samples=3)
    ab.side_by_side(); print(ab.prompt_diff("without knowledge")); ab.frame
"""
from __future__ import annotations

import difflib
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import Campaign, NotAllowed, html
from engine.context import HISTORY_SECTIONS, MEMORY_SECTIONS, Report, tokens
from engine.context.builder import SEPARATOR
from engine.knowledge.framing import ALWAYS_SECTION, CLASS_SECTIONS, RULE_SECTION
from engine.narrative import count_leaks, split
from engine.providers import Prompt, Text, Usage

__all__ = ["BASELINE", "GROUPS", "Ablation", "Variant", "ablate", "load", "variants"]

BASELINE = "as recorded"
# What a reader names -> the stored section names it covers.
GROUPS = {
    "knowledge": (RULE_SECTION, ALWAYS_SECTION, *CLASS_SECTIONS.values()),
    "memories": MEMORY_SECTIONS,
    "summary": ("story_summary",),
    "state": ("narrative_state",),
    "protocol": ("emit_rule", "reminder"),
    "history": HISTORY_SECTIONS,
    "instructions": ("ai_instructions",),
    "canon": ("campaign_canon",),
}
TABLE = "ablation_samples"


@dataclass(frozen=True)
class Variant:
    """One prompt to narrate: its name, its two parts, and what was taken out."""

    name: str
    system: str
    story: str
    removed_tokens: int = 0


# ---------------------------------------------------------------- building the variants
def _sections(report) -> list[dict]:
    sections = [dict(s) for s in report.get("sections") or []]
    if not sections or any("text" not in s for s in sections):
        raise NotAllowed("This turn's record keeps no section texts, so its prompt cannot be rebuilt for ablation.")
    return sections


def _assemble(sections: list[dict]) -> tuple[str, str]:
    parts = {"system": [], "story": []}
    for s in sections:
        if s["text"]:
            parts[s["part"]].append(s["text"])
    return SEPARATOR.join(parts["system"]), SEPARATOR.join(parts["story"])


def _cut_line(sections: list[dict], name: str, line: str, what: str) -> list[dict]:
    """Remove one rendered item (a memory's line, a passage's block) from the section holding it."""
    out, found = [], False
    for s in sections:
        if not found and (s["name"] == name or name == "*") and line in s["text"]:
            s = {**s, "text": s["text"].replace(line, "", 1).replace("\n\n\n", "\n\n").strip("\n")}
            found = True
        out.append(s)
    if not found:
        raise NotAllowed(f"{what} was not in this turn's prompt.")
    return out


def _memory_line(report, memory_id: int) -> str:
    for m in report.used("memories"):
        if m.get("id") == memory_id:
            return ("- [inferred] " if m.get("authority") == "heuristic" else "- ") + m["text"]
    raise NotAllowed(f"Memory {memory_id} was not recalled for this turn; its prompt showed "
                     f"{[m.get('id') for m in report.used('memories')]}.")


def _passage_text(report, passage_id: int) -> str:
    for p in report.used("knowledge"):
        if p.get("passage_id") == passage_id:
            return p["rendered"]
    raise NotAllowed(f"Passage {passage_id} was not in this turn's prompt.")


def _names(what: str) -> tuple[str, ...]:
    if what not in GROUPS:
        raise NotAllowed(f"Unknown section {what!r}: use one of {', '.join(GROUPS)}, 'memory:<id>' or 'passage:<id>'.")
    return GROUPS[what]


def _without(report, sections: list[dict], what: str) -> list[dict]:
    kind, _, ident = what.partition(":")
    if ident and kind == "memory":
        sections = _cut_line(sections, "*", _memory_line(report, int(ident)), f"Memory {ident}")
        return [s for s in sections if not (s["name"] in MEMORY_SECTIONS and "\n- " not in s["text"])]
    if ident and kind == "passage":
        return _cut_line(sections, "*", _passage_text(report, int(ident)), f"Passage {ident}")
    names = _names(what)
    if not any(s["name"] in names for s in sections):
        raise NotAllowed(f"This turn's prompt had no {what} section to remove.")
    return [s for s in sections if s["name"] not in names]


def _replaced(sections: list[dict], what: str, text: str) -> list[dict]:
    names = _names(what)
    if not any(s["name"] in names for s in sections):
        raise NotAllowed(f"This turn's prompt had no {what} section to replace; remove one that is there instead.")
    first = next(s for s in sections if s["name"] in names)
    return [({**s, "text": text} if s is first else s) for s in sections if s is first or s["name"] not in names]


def variants(report, remove: Iterable[str] = (), replace: dict[str, str] | None = None) -> list[Variant]:
    """The unchanged prompt first, then one variant per removal and replacement."""
    report = report if isinstance(report, Report) else Report(report)
    sections = _sections(report)
    system, story = _assemble(sections)
    stored = report.prompt
    if any(stored) and tuple(stored) != (system, story):
        raise NotAllowed("This turn's stored sections do not rebuild its stored prompt exactly; ablating it would "
                         "compare against a prompt the narrator never saw.")
    full = tokens.count(system) + tokens.count(story)
    out = [Variant(BASELINE, system, story)]
    changed = [(f"without {w}", _without(report, sections, w)) for w in remove]
    changed += [(f"{w} replaced", _replaced(sections, w, t)) for w, t in (replace or {}).items()]
    for name, parts in changed:
        s, t = _assemble(parts)
        out.append(Variant(name, s, t, full - tokens.count(s) - tokens.count(t)))
    return out


# ---------------------------------------------------------------- narrating and storing
def _narrate(narrator, variant: Variant, settings) -> dict:
    prompt = Prompt(variant.system, variant.story, settings.max_output_tokens, settings.temperature)
    started, text, usage = time.perf_counter(), [], Usage()
    for chunk in narrator.execute(prompt):
        if isinstance(chunk, Text):
            text.append(chunk.text)
        elif isinstance(chunk, Usage):
            usage = chunk
    raw = "".join(text)
    return {"reply": split(raw).prose.strip(), "raw_leaks": count_leaks([(0, raw)])["leaking"],
            "prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
            "processed_tokens": usage.processed_tokens, "completion_tokens": usage.completion_tokens,
            "ms": round((time.perf_counter() - started) * 1000, 2)}


def _store(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        frame.to_sql(TABLE, conn, if_exists="append", index=False)
    conn.close()


def load(store: str | Path, experiment: str | None = None) -> pd.DataFrame:
    """Every stored ablation narration (of one experiment, if named)."""
    with sqlite3.connect(store) as conn:
        query, args = f"SELECT * FROM {TABLE}", ()
        if experiment:
            query, args = query + " WHERE experiment = ?", (experiment,)
        frame = pd.read_sql_query(query, conn, params=args)
    conn.close()
    return frame


class Ablation:
    """The narrations of one ablation, with the prompts they were given."""

    def __init__(self, frame: pd.DataFrame, prompts: dict[str, Variant], original: str):
        self.frame, self.prompts, self.original = frame, prompts, original

    def side_by_side(self) -> pd.DataFrame:
        """Samples down, variants across: the replies to read against each other."""
        table = self.frame.pivot(index="sample", columns="variant", values="reply")
        return table[[v for v in self.prompts if v in table.columns]]

    def summary(self) -> pd.DataFrame:
        """Per variant: tokens taken out, mean reply length, and how far replies drift from the unchanged ones."""
        base = self.frame[self.frame["variant"] == BASELINE]["reply"].tolist()
        rows = []
        for name, part in self.frame.groupby("variant", sort=False):
            replies = part["reply"].tolist()
            rows.append({"variant": name, "removed_tokens": int(part["removed_tokens"].iloc[0]),
                         "samples": len(part), "reply_words": part["reply"].str.split().str.len().mean(),
                         "similarity_to_unchanged": _similarity(replies, base),
                         "similarity_to_original": _similarity(replies, [self.original])})
        return pd.DataFrame(rows).set_index("variant")

    def prompt_diff(self, variant: str) -> str:
        """What the variant's prompt lost or gained, as a unified diff of the story and system text."""
        a, b = self.prompts[BASELINE], self.prompts[variant]
        return "\n".join(difflib.unified_diff(
            (a.system + "\n\n" + a.story).splitlines(), (b.system + "\n\n" + b.story).splitlines(),
            BASELINE, variant, lineterm="", n=1))

    def reply_diff(self, variant: str, sample: int = 1) -> str:
        """Word-level difference between an unchanged sample's reply and the variant's."""
        pick = self.frame.set_index(["variant", "sample"])["reply"]
        a, b = pick[(BASELINE, sample)].split(), pick[(variant, sample)].split()
        out = []
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if op == "equal":
                out.append(" ".join(a[i1:i2]))
            else:
                out.append(("[-" + " ".join(a[i1:i2]) + "-]" if i2 > i1 else "")
                           + ("{+" + " ".join(b[j1:j2]) + "+}" if j2 > j1 else ""))
        return " ".join(x for x in out if x)

    def _repr_html_(self) -> str:
        return html.frame(self.summary().reset_index()) + html.frame(self.side_by_side().reset_index())


def _similarity(replies: list[str], others: list[str]) -> float | None:
    """Mean word-sequence similarity (difflib ratio, 0 to 1) of each reply to each other one."""
    pairs = [(a, b) for a in replies for b in others if a is not b]
    if not pairs:
        return None
    return round(sum(difflib.SequenceMatcher(a=a.split(), b=b.split(), autojunk=False).ratio()
                     for a, b in pairs) / len(pairs), 3)


def ablate(camp: Campaign, node_id: int, *, remove: Iterable[str] = (), replace: dict[str, str] | None = None,
           samples: int = 3, store: str | Path = "ablations.db", narrator=None, progress: bool = True) -> Ablation:
    """Narrate turn `node_id`'s recorded prompt `samples` times unchanged and
    `samples` times per variant, with the campaign's narrator (or `narrator`);
    rows are appended to `store` under one experiment id."""
    if samples < 1:
        raise NotAllowed("An ablation needs at least one sample per variant.")
    turn = camp.turn(node_id)
    todo = variants(turn.report, remove, replace)
    if len(todo) == 1:
        raise NotAllowed("Name something to ablate: remove=['knowledge'] or replace={'summary': '...'}.")
    narrator = narrator or camp.workbench.narrator
    experiment, when = uuid.uuid4().hex[:12], datetime.now(UTC).isoformat(timespec="seconds")
    rows = []
    for variant, sample in tqdm([(v, i) for i in range(1, samples + 1) for v in todo], desc="ablation",
                                disable=not progress):
        rows.append({"experiment": experiment, "created_at": when, "campaign_id": camp.id, "node_id": node_id,
                     "narrator": narrator.model_id, "variant": variant.name, "sample": sample,
                     "removed_tokens": variant.removed_tokens, **_narrate(narrator, variant, camp.workbench.settings)})
    frame = pd.DataFrame(rows)
    _store(frame, Path(store))
    return Ablation(frame, {v.name: v for v in todo}, turn.text)
