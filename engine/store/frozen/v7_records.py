"""Frozen for migration v7 (turn records v2 -> v3): how a v3 record was
compacted and expanded, how a history line rendered and how a path was
walked, as of the commit that wrote the migration. Never edit: a later record
format gets its own migration and its own module.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Line", "compact", "expand", "history_ref", "path_to"]

RECORD_VERSION = 3
MIN_STASHED = 48
REF = "#"
SEPARATOR = "\n\n"
DERIVED_KEPT = ("kind", "status", "failures")
LEGACY_ALIASES = ("prompt", "system", "story", "budget", "estimate")


class Line(NamedTuple):
    kind: str
    text: str
    depth: int | None = None


def render_line(line: Line) -> str:
    if line.kind == "direction":
        return f"[Story direction from the player: {line.text}]"
    return line.text


@dataclass(frozen=True)
class Segment:
    branch_id: int
    first: int
    last: int


@dataclass(frozen=True)
class Path:
    segments: tuple[Segment, ...]
    depth: int

    def branch_at(self, depth: int) -> int | None:
        for s in self.segments:
            if s.first <= depth <= s.last:
                return s.branch_id
        return None


def path_to(branches: dict[int, tuple[int | None, int]], branch_id: int | None, depth: int) -> Path:
    """A branch met twice is a loop (a crafted file): ValueError, so the
    step leaves that record as it was instead of walking for ever."""
    segments: list[Segment] = []
    seen: set[int] = set()
    current, last = branch_id, depth
    while current is not None and last >= 0:
        if current in seen:
            raise ValueError(f"branch {current} is its own ancestor")
        seen.add(current)
        parent, fork = branches[current]
        first = fork + 1
        if last >= first:
            segments.append(Segment(current, first, last))
        last = min(last, fork)
        current = parent
    return Path(tuple(segments), depth)


def text_hash(value: str) -> str:
    return hashlib.blake2b(value.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class HistoryRef:
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
    if not lines or any(x.depth is None for x in lines):
        return None
    rendered = [render_line(x) for x in lines]
    first, last = lines[0].depth, lines[-1].depth
    if last - first + 1 != len(lines):
        return None
    if _join_history(rendered, None, "") == section_text:
        return HistoryRef(first, last)
    for at in range(len(rendered), -1, -1):
        head, tail = SEPARATOR.join(rendered[:at]), SEPARATOR.join(rendered[at:])
        prefix = head + SEPARATOR if at else ""
        suffix = SEPARATOR + tail if at < len(rendered) else ""
        if section_text.startswith(prefix) and section_text.endswith(suffix):
            note = section_text[len(prefix): len(section_text) - len(suffix)]
            if note and _join_history(rendered, at, note) == section_text:
                return HistoryRef(first, last, at, note)
    return None


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


def compact(report: Mapping, history: HistoryRef | None = None) -> tuple[dict, dict[str, str]]:
    body = {k: v for k, v in report.items() if k not in LEGACY_ALIASES}
    sections = []
    for section in body.get("sections", []):
        section = dict(section)
        if section.get("name") == "history" and history is not None:
            section.pop("text", None)
            section["nodes"] = [history.first, history.last]
            if history.note_at is not None:
                section.update(note_at=history.note_at, authors_note=history.authors_note)
        sections.append(section)
    body["sections"] = sections
    if isinstance(body.get("derived"), list):
        body["derived"] = [{k: d.get(k) for k in DERIVED_KEPT} if isinstance(d, dict) else d for d in body["derived"]]
    texts: dict[str, str] = {}
    stored = _stash(body, texts)
    stored["version"] = RECORD_VERSION
    return stored, texts


def expand(stored: Mapping, texts: Mapping[str, str], history: Callable[[int, int], list[Line]]) -> dict:
    """Only the prompt is rebuilt: the migration compares it with what was sent."""
    body = _unstash({k: v for k, v in stored.items() if k != "version"}, texts)
    for section in body.get("sections", []):
        if "nodes" in section and "text" not in section:
            first, last = section["nodes"]
            lines = [render_line(x) for x in history(first, last)]
            section["text"] = _join_history(lines, section.get("note_at"), section.get("authors_note", ""))
    system = SEPARATOR.join(s.get("text", "") for s in body.get("sections", []) if s.get("part") == "system")
    story = SEPARATOR.join(s.get("text", "") for s in body.get("sections", []) if s.get("part") == "story")
    return {**body, "prompt": {"system": system, "story": story}}
