"""The turn record: what one take was shown and what came back, kept once.

This module owns the record: the one class every reader uses (`Turn`: what
`act` returns, `records()`, the report display, the widgets, bundles), the
one function that writes records (`write_stored`; a played turn reaches it
through `write_record`, a bundle import directly), and the round trip
between the report the builder made and the compact form that is stored.

Why compact: the v2 record kept each prompt three times (the sections' texts,
`prompt`, and `system`/`story`), about 180 KB per turn at a 16k budget, and a
3,000-turn campaign weighed 701 MB. A v3 record keeps only what cannot be
derived again: each long text is stored once per database in `prompt_texts`
under its content hash (the system block, a summary or a retrieved passage
that recurs costs one row however many takes show it), and the history
section, which is most of every prompt, is a depth range on the take's own
path. The reference is written only after the rebuilt text was compared with
the text that was sent, so the exact prompt always comes back byte for byte.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy import select
from sqlalchemy.dialects.sqlite import insert

from ..context import Line, Report, render_line
from ..context.builder import SEPARATOR
from ..context.report import HISTORY_SECTIONS, MEMORY_SECTIONS
from ..display import turn_html
from ..knowledge.framing import ALWAYS_SECTION, CLASS_SECTIONS, RULE_SECTION
from ..store import NodeRow, TurnRecordRow
from ..store.models import PromptTextRow
from ..story.lineage import branch_table, path_to
from ..story.tree import recorded_at, texts_as_of

__all__ = [
    "REF", "RECORD_VERSION", "RECORD_COLUMNS", "SECTION_COLUMNS", "STORED_FIELDS", "HistoryRef", "Turn", "TurnRecord",
    "compact", "expand", "from_row", "hashes_of", "history_ref", "load", "load_report", "record_columns",
    "store_texts", "stored_rows", "stored_texts", "text_hash", "write_record", "write_stored",
]

RECORD_VERSION = 3
# Every string of at least MIN_STASHED characters moves to `prompt_texts`
# (section texts, passages, memories, the "why" of each section, the
# knowledge summary): most recur from turn to turn and are then kept once.
# Shorter ones stay inline: a reference is a 32-character hash plus a row.
MIN_STASHED = 48
REF = "#"  # "text#": "<hash>" stands for "text": <the stored text>
# Derived-work status is shown per take only as kind, status and failures: its
# timestamps and details were 660 of a record's 7,300 bytes and are kept by
# `camp.derived()` anyway.
DERIVED_KEPT = ("kind", "status", "failures")
# Names a v2 report carried twice; rebuilt on load for readers that have not
# moved to the canonical names yet (tokens.*, prompt.*), never stored.
LEGACY_ALIASES = ("prompt", "system", "story", "budget", "estimate")


def text_hash(value: str) -> str:
    """128 bits of BLAKE2b: a collision among one file's prompt texts is not a practical concern."""
    return hashlib.blake2b(value.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class HistoryRef:
    """The history section as nodes `first`..`last` of the take's path, with
    the author's note (if any) inserted before line `note_at`."""

    first: int
    last: int
    note_at: int | None = None
    authors_note: str = ""


def _join_history(lines: Sequence[str], note_at: int | None, note: str) -> str:
    parts = list(lines)
    if note_at is not None:
        parts.insert(note_at, note)
    return SEPARATOR.join(parts)


def history_ref(section_text: str, lines: Sequence[Line]) -> HistoryRef | None:
    """A reference that rebuilds `section_text` exactly from `lines` (the newest
    nodes the builder included), or None when it cannot (a truncated oldest
    node, for one): the caller then stores the text itself."""
    if not lines or any(x.depth is None for x in lines):
        return None
    rendered = [render_line(x) for x in lines]
    first, last = lines[0].depth, lines[-1].depth
    if last - first + 1 != len(lines):
        return None
    if _join_history(rendered, None, "") == section_text:
        return HistoryRef(first, last)
    # The builder inserts the author's note a few lines from the end; find it
    # by what surrounds it instead of knowing that rule here.
    for at in range(len(rendered), -1, -1):
        head, tail = SEPARATOR.join(rendered[:at]), SEPARATOR.join(rendered[at:])
        prefix = head + SEPARATOR if at else ""
        suffix = SEPARATOR + tail if at < len(rendered) else ""
        if section_text.startswith(prefix) and section_text.endswith(suffix):
            note = section_text[len(prefix): len(section_text) - len(suffix)]
            if note and _join_history(rendered, at, note) == section_text:
                return HistoryRef(first, last, at, note)
    return None


# ------------------------------------------------------------------ pure: compact <-> expand
def _stash(value, texts: dict[str, str]):
    if isinstance(value, list):
        return [_stash(v, texts) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if isinstance(item, str) and len(item) >= MIN_STASHED and not key.endswith(REF):
            digest = text_hash(item)
            texts[digest] = item
            out[key + REF] = digest
        else:
            out[key] = _stash(item, texts)
    return out


def _unstash(value, texts: Mapping[str, str]):
    if isinstance(value, list):
        return [_unstash(v, texts) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key.endswith(REF) and isinstance(item, str) and item in texts:
            out[key[:-1]] = texts[item]
        else:
            out[key] = _unstash(item, texts)
    return out


def compact(report: Mapping, history: HistoryRef | None = None,
            recent: HistoryRef | None = None) -> tuple[dict, dict[str, str]]:
    """The stored form of a built report, and the texts it refers to by hash.
    `recent` stands for "history_recent", the newest nodes shown after the
    held memories, as `history` does for the history section."""
    body = {k: v for k, v in report.items() if k not in LEGACY_ALIASES}
    sections = []
    refs = {"history": history, "history_recent": recent}
    for section in body.get("sections", []):
        section = dict(section)
        ref = refs.get(section.get("name"))
        if ref is not None:
            section.pop("text", None)
            section["nodes"] = [ref.first, ref.last]
            if ref.note_at is not None:
                section.update(note_at=ref.note_at, authors_note=ref.authors_note)
        sections.append(section)
    body["sections"] = sections
    if isinstance(body.get("derived"), list):
        body["derived"] = [{k: d.get(k) for k in DERIVED_KEPT} if isinstance(d, dict) else d for d in body["derived"]]
    texts: dict[str, str] = {}
    stored = _stash(body, texts)
    stored["version"] = RECORD_VERSION
    return stored, texts


def hashes_of(stored) -> set[str]:
    """Every text hash a stored report refers to."""
    found: set[str] = set()

    def walk(value):
        if isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key.endswith(REF) and isinstance(item, str):
                    found.add(item)
                else:
                    walk(item)
    walk(stored)
    return found


def expand(stored: Mapping, texts: Mapping[str, str], history: Callable[[int, int], list[Line]]) -> Report:
    """The full report a reader sees, the exact prompt included. A v2 report
    (no `version`) is returned as it was stored."""
    if not isinstance(stored, Mapping) or stored.get("version") != RECORD_VERSION:
        return Report(stored if isinstance(stored, Mapping) else {})
    body = _unstash({k: v for k, v in stored.items() if k != "version"}, texts)
    for section in body.get("sections", []):
        if "nodes" in section and "text" not in section:
            first, last = section["nodes"]
            lines = [render_line(x) for x in history(first, last)]
            section["text"] = _join_history(lines, section.get("note_at"), section.get("authors_note", ""))
    system = SEPARATOR.join(s.get("text", "") for s in body.get("sections", []) if s.get("part") == "system")
    story = SEPARATOR.join(s.get("text", "") for s in body.get("sections", []) if s.get("part") == "story")
    tokens = body.get("tokens", {})
    return Report({
        **body, "version": RECORD_VERSION, "prompt": {"system": system, "story": story},
        # legacy aliases (see LEGACY_ALIASES)
        "system": system, "story": story, "estimate": tokens.get("estimate"),
        "budget": {"configured": tokens.get("configured_budget"), "effective": tokens.get("budget"),
                   "reserve": tokens.get("safety_reserve"), "max_output": tokens.get("output_reserve")},
    })


# ------------------------------------------------------------------ the record's names, as columns
SECTION_COLUMNS = {
    "tok_system": ("narrator_rules", "emit_rule", "campaign_canon", "ai_instructions", "premise", "protagonist"),
    # The library names its sections itself (the rule, always-in-force Canon, one per class).
    "tok_knowledge": ("knowledge", RULE_SECTION, ALWAYS_SECTION, *CLASS_SECTIONS.values()),
    "tok_history": (*HISTORY_SECTIONS, "input", "input_restated"),
    "tok_summary": ("story_summary",),
    "tok_memories": MEMORY_SECTIONS,
    "tok_state": ("narrative_state",),
    "tok_hints": ("length_hint", "reminder"),
}
USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "cached_tokens", "processed_tokens", "prompt_ms",
                 "generation_ms")
RECORD_COLUMNS = [
    "narrator", "record_version", "budget", "window", "window_source", "window_verified", "estimate_tokens",
    *SECTION_COLUMNS, *USAGE_COLUMNS, "accounting", "history_included", "history_total", "history_first",
    "history_last", "floor_depth", "memories_used", "knowledge_used", "state_accepted", "prepare_ms",
    "generate_ms",
]


def _section_tokens(sections) -> dict[str, int]:
    out = dict.fromkeys(SECTION_COLUMNS, 0)
    for section in sections or []:
        name = section.get("name", "")
        for column, names in SECTION_COLUMNS.items():
            if name in names:
                out[column] += section.get("tokens") or 0
                break
    return out


def record_columns(narrator: str, report: Mapping, usage: Mapping, window: Mapping, accounting: Mapping,
                   timings: Mapping) -> dict:
    """One take's record flattened to the RECORD_COLUMNS names; reads v2 and v3
    alike, and needs no prompt text, so a table of 10,000 turns loads none."""
    tokens, hist = report.get("tokens") or {}, report.get("history") or {}
    spans = [s.get("nodes") for s in report.get("sections", []) if s.get("name") in HISTORY_SECTIONS
             and isinstance(s.get("nodes"), list) and len(s.get("nodes")) == 2]
    history_nodes = [spans[0][0], spans[-1][1]] if spans else None
    knowledge, memories = report.get("knowledge") or {}, report.get("memories") or {}
    return {
        "narrator": narrator, "record_version": report.get("version", 2) if report else None,
        "budget": tokens.get("budget"), "window": window.get("tokens"), "window_source": window.get("source"),
        "window_verified": window.get("verified"), "estimate_tokens": tokens.get("estimate", report.get("estimate")),
        **_section_tokens(report.get("sections")),
        **{name: usage.get(name) for name in USAGE_COLUMNS},
        "accounting": accounting.get("status"), "history_included": hist.get("included"),
        "history_total": hist.get("total"),
        "history_first": history_nodes[0] if history_nodes else None,
        "history_last": history_nodes[1] if history_nodes else None,
        "floor_depth": hist.get("floor_depth"), "memories_used": len(memories.get("used") or []),
        "knowledge_used": len(knowledge.get("used") or []),
        "state_accepted": (report.get("narrative") or {}).get("accepted"),
        "prepare_ms": timings.get("prepare_ms"), "generate_ms": timings.get("generate_ms"),
    }


# ------------------------------------------------------------------ the record
@dataclass(frozen=True)
class Turn:
    """One narration and what it was given: the one turn record.

    What `act`, `retry`, `edit` and `camp.turn(id)` return, what `records()`
    flattens (`columns()`), what the widgets and experiments read and what a
    bundle carries. The report is read when first asked for: rebuilding the
    exact prompt reads the history it refers to, which a turn that is only
    played never needs; a turn just written carries the report it was built
    with, so nothing is read back."""

    id: int
    text: str
    depth: int
    input: str | None = None
    reasoning: str | None = None
    take: int = 1
    takes: int = 1
    narrator: str = ""
    usage: dict = field(default_factory=dict)
    accounting: dict = field(default_factory=dict)
    window: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    # The report as built (a Report) or how to read it (a callable returning one).
    report_from: Report | Callable[[], Report] | None = field(default=None, repr=False, compare=False)
    # The compact stored form, when read from the file: columns() needs no prompt text.
    stored: Mapping | None = field(default=None, repr=False, compare=False)

    @cached_property
    def report(self) -> Report:
        """What the narrator was shown, the exact prompt included."""
        source = self.report_from
        if callable(source):
            return source()
        return source if isinstance(source, Report) else Report(source or {})

    @property
    def node_id(self) -> int:
        return self.id

    @property
    def version(self) -> int:
        body = self.stored if self.stored is not None else self.report
        return body.get("version", 2) if body else 0

    @property
    def prompt(self) -> tuple[str, str]:
        """(system, story) exactly as the narrator was sent them."""
        return tuple(self.report.prompt)

    @property
    def cut(self) -> bool:
        """Whether the reply was stopped short (length limit, window, or an
        unfinished sentence) and stored cut to its last complete sentence."""
        return bool(self.accounting.get("reply_cut"))

    @property
    def tail(self) -> str:
        """The text cut off the end of the reply ("" when nothing was)."""
        return str(self.accounting.get("tail") or "")

    def columns(self) -> dict:
        """This record flattened to the RECORD_COLUMNS names."""
        body = self.stored if self.stored is not None else self.report
        return record_columns(self.narrator, body or {}, self.usage, self.window, self.accounting, self.timings)

    def _repr_html_(self) -> str:
        return turn_html(self)


# Its old name, kept for notebooks and users' code.
TurnRecord = Turn


# ------------------------------------------------------------------ the one writer and its readers
def store_texts(session, texts: Mapping[str, str]) -> None:
    """Insert the texts not stored yet; a text already kept costs nothing."""
    if texts:
        session.execute(insert(PromptTextRow).on_conflict_do_nothing(),
                        [{"hash": h, "text": t} for h, t in texts.items()])


def stored_texts(session, hashes: Iterable[str]) -> dict[str, str]:
    hashes = list(set(hashes))
    out: dict[str, str] = {}
    for i in range(0, len(hashes), 500):  # SQLite's bound-parameter limit
        out.update(session.execute(select(PromptTextRow.hash, PromptTextRow.text)
                                   .where(PromptTextRow.hash.in_(hashes[i:i + 500]))).all())
    return out


STORED_FIELDS = ("narrator", "report", "usage", "accounting", "window", "timings")


def write_stored(session, rows: Sequence[Mapping], texts: Mapping[str, str]) -> None:
    """The only writer of turn_records: rows already in stored form
    (`node_id` and STORED_FIELDS), with the texts they refer to by hash. A
    played turn reaches it through `write_record`; a bundle import directly."""
    store_texts(session, texts)
    if rows:
        session.execute(insert(TurnRecordRow), [{"node_id": r["node_id"], **{k: r[k] for k in STORED_FIELDS}}
                                                for r in rows])


def write_record(session, node_id: int, turn: Turn, history: HistoryRef | None,
                 recent: HistoryRef | None = None) -> None:
    """Compact a played take's record and write it."""
    stored, texts = compact(turn.report, history, recent)
    write_stored(session, [{"node_id": node_id, "narrator": turn.narrator, "report": stored,
                            "usage": dict(turn.usage), "accounting": dict(turn.accounting),
                            "window": dict(turn.window), "timings": dict(turn.timings)}], texts)


def stored_rows(session, node_ids: Iterable[int]):
    """The stored records of these nodes, in id batches (bundle export and records() read them)."""
    ids = list(node_ids)
    for i in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        yield from session.scalars(select(TurnRecordRow).where(TurnRecordRow.node_id.in_(ids[i:i + 500])))


def _path_lines(session, node: NodeRow) -> Callable[[int, int], list[Line]]:
    def lines(first: int, last: int) -> list[Line]:
        path = path_to(branch_table(session, node.campaign_id), node.branch_id, node.depth)
        rows = session.execute(select(NodeRow.id, NodeRow.kind, NodeRow.text, NodeRow.depth)
                               .where(path.clause(after=first - 1, upto=last))
                               .order_by(NodeRow.depth)).all()
        # A passage revised in place since this record was written is shown as it was then.
        then = texts_as_of(session, [r[0] for r in rows], recorded_at(session, node))
        return [Line(kind, then.get(node_id, value), depth) for node_id, kind, value, depth in rows]
    return lines


def load_report(session, node: NodeRow) -> Report:
    """One take's report, its exact prompt rebuilt."""
    row = session.get(TurnRecordRow, node.id)
    stored = (row.report or {}) if row is not None else {}
    return expand(stored, stored_texts(session, hashes_of(stored)), _path_lines(session, node))


def from_row(node: NodeRow, row: TurnRecordRow | None, *, input: str | None = None, take: int = 1,
             takes: int = 1, report_from: Report | Callable[[], Report] | None = None) -> Turn:
    """The record of a stored take (its report read when asked for, through `report_from`)."""
    return Turn(node.id, node.text, node.depth, input, node.reasoning, take, takes,
                row.narrator if row else "", dict(row.usage or {}) if row else {},
                dict(row.accounting or {}) if row else {}, dict(row.window or {}) if row else {},
                dict(row.timings or {}) if row else {}, report_from=report_from,
                stored=(row.report or {}) if row else None)


def load(session, node: NodeRow) -> Turn:
    """The record of one take, its exact prompt rebuilt now."""
    return from_row(node, session.get(TurnRecordRow, node.id), report_from=load_report(session, node))
