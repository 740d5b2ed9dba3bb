"""Prompt texts stored once, and the step that moves v2 turn records to v3.

A v3 record (see `engine.turns.record`; this step uses the frozen copy in
`frozen/v7_records.py`, never the live code) refers to long texts by content hash
and to its history by a depth range on the take's path. This migration adds
the text table and rewrites every older record in place; a record whose
prompt the new form would not give back byte for byte is left as it was (it
still displays: readers accept both versions).
"""
from __future__ import annotations

import json
from sqlite3 import Connection

from .frozen.v7_records import Line, compact, expand, history_ref, path_to

__all__ = ["migrate"]

_DDL = [
    # WITHOUT ROWID: the hash is the key, so a second index would only copy it.
    "CREATE TABLE prompt_texts (hash VARCHAR(32) PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID",
]


def migrate(db: Connection) -> None:
    for statement in _DDL:
        db.execute(statement)
    _convert_records(db)


class _Lines:
    """Every node of the file in memory (kind, text per coordinate): a few
    hundred bytes a node, and it saves a query per record."""

    def __init__(self, db: Connection):
        self.line = Line
        self.nodes = {nid: (camp, branch, depth) for nid, camp, branch, depth in
                      db.execute("SELECT id, campaign_id, branch_id, depth FROM nodes")}
        self.at = {(branch, depth): (kind, text) for branch, depth, kind, text in
                   db.execute("SELECT branch_id, depth, kind, text FROM nodes")}
        self.branches: dict[int, dict[int, tuple[int | None, int]]] = {}
        for bid, camp, parent, fork in db.execute("SELECT id, campaign_id, parent_id, fork_depth FROM branches"):
            self.branches.setdefault(camp, {})[bid] = (parent, fork)

    def of(self, node_id: int, first: int, last: int) -> list | None:
        if node_id not in self.nodes:
            return None
        camp, branch, depth = self.nodes[node_id]
        try:
            path = path_to(self.branches.get(camp, {}), branch, depth)
        except (KeyError, ValueError):  # a branch that is missing or its own ancestor: no history to refer to
            return None
        out = []
        for d in range(first, last + 1):
            found = self.at.get((path.branch_at(d), d))
            if found is None:
                return None
            out.append(self.line(found[0], found[1], d))
        return out


def _reference(report: dict, node_id: int, lines: _Lines):
    section = next((s for s in report.get("sections", []) if isinstance(s, dict) and s.get("name") == "history"), None)
    info = report.get("history") if isinstance(report.get("history"), dict) else {}
    included, total = info.get("included"), info.get("total")
    if section is None or not isinstance(included, int) or not isinstance(total, int) or included <= 0:
        return None
    found = lines.of(node_id, total - included, total - 1)
    return history_ref(section.get("text", ""), found) if found else None


def _convert(report: dict, node_id: int, lines: _Lines, db: Connection) -> dict | None:
    """The v3 form of a v2 report, or None to keep it as it is."""
    prompt = report.get("prompt")
    if not isinstance(prompt, dict) or not isinstance(report.get("sections"), list):
        return None
    stored, texts = compact(report, _reference(report, node_id, lines))
    rebuilt = expand(stored, texts, lambda first, last: lines.of(node_id, first, last) or [])
    if rebuilt["prompt"] != {"system": prompt.get("system"), "story": prompt.get("story")}:
        return None
    db.executemany("INSERT OR IGNORE INTO prompt_texts (hash, text) VALUES (?, ?)", list(texts.items()))
    return stored


def _convert_records(db: Connection) -> None:
    lines = _Lines(db)
    ids = [r[0] for r in db.execute("SELECT node_id FROM turn_records ORDER BY node_id")]
    for node_id in ids:  # one record in memory at a time: old files run to hundreds of MB
        (raw,) = db.execute("SELECT report FROM turn_records WHERE node_id = ?", (node_id,)).fetchone()
        try:
            report = json.loads(raw) if raw else {}
        except ValueError:
            continue
        if not isinstance(report, dict) or "version" in report:
            continue
        stored = _convert(report, node_id, lines, db)
        if stored is not None:
            db.execute("UPDATE turn_records SET report = ? WHERE node_id = ?", (json.dumps(stored), node_id))
