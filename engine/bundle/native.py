"""This workbench's own bundle, versions 1 and 2: the readers.

The shape (every id is local to the file and renumbered on import):

    {"format": "story-workbench-campaign", "version": 1, "exported_at": ...,
     "campaign": {title, premise, protagonist, ai_instructions, authors_note,
                  narration_length, canon, state, created_at, updated_at},
     "head": {"branch": id, "depth": n},
     "branches": [{id, parent, fork_depth, created_at}]        parents first,
     "nodes": [{id, branch, depth, parent, kind, text, raw_text, reasoning,
                live, edited, state_after, created_at, record}]  take order,
     "save_points", "memories", "summaries", "state_events",
     "knowledge", "story_cards": [...],
     "visual_profiles": [{entity_key, descriptors, features, style_notes,
                          created_at, updated_at}]}          optional, by key

A node's `record` is its turn record (narrator, report, usage, accounting,
window, timings) or null. In a version-1 file an empty section means "none";
an absent one means the writer could not say, and nothing is invented for it.

Version 2 adds `"prompt_texts": {hash: text}`: its records are v3 turn
records (engine.turns.record), which keep each long text once by content hash
and their history as a node range, so a 1,000-turn bundle no longer carries a
thousand copies of the same system block and history. A text whose hash does
not match (an export scrubbed it, or the file was edited) is filed under its
true hash and the records are pointed at it; a record that refers to a text
the file lacks is dropped, its narration kept.

`visual_profiles` (engine.media) came later without a version bump: an older
reader ignores the key, and a file without it has no profiles, which is what
an older file meant.
"""
from __future__ import annotations

from typing import Any

from ..budget import standing
from ..turns.record import REF, hashes_of, text_hash
from .errors import BundleRefused
from .fields import MISSING, json_object, moment, state_document, string
from .library import read_cards, read_knowledge
from .plan import Notes, Plan
from .sections import read_events, read_memories, read_save_points, read_summaries, read_visual_profiles
from .tree import read_tree

__all__ = ["FORMAT", "NARRATION_LENGTHS", "VERSION", "read_campaign", "read_v1", "read_v2"]

FORMAT = "story-workbench-campaign"
VERSION = 2
NARRATION_LENGTHS = ("", "brief", "medium", "long")
UNTITLED = "Imported campaign"


def read_campaign(raw: Any, notes: Notes) -> dict[str, Any]:
    """The campaign's own fields. Each matters only to itself, so each is
    repaired rather than refused."""
    if not isinstance(raw, dict):
        raise BundleRefused("The file has no campaign section (title, premise, state...). Nothing was imported.")
    title = string(raw.get("title", MISSING), notes, "the title").strip()
    if not title:
        notes.repair(f"the campaign had no title; it is called “{UNTITLED}”")
        title = UNTITLED
    if len(title) > 200:
        notes.repair("the title was longer than 200 characters; shortened")
    length = raw.get("narration_length", "")
    if length not in NARRATION_LENGTHS:
        notes.repair(f"the narration length {length!r} is not one this workbench knows; left unset")
        length = ""
    return {
        "title": title[:200],
        "premise": _bounded(raw, "premise", notes, "the premise"),
        "protagonist": _bounded(raw, "protagonist", notes, "the protagonist"),
        "ai_instructions": _bounded(raw, "ai_instructions", notes, "the AI instructions"),
        "authors_note": _bounded(raw, "authors_note", notes, "the author's note"),
        "narration_length": length,
        "canon": _canon(raw.get("canon", MISSING), notes),
        "state": state_document(raw.get("state", MISSING), notes, "the campaign's state"),
        "created_at": moment(raw.get("created_at", MISSING), notes, "the campaign's creation time"),
        "updated_at": moment(raw.get("updated_at", MISSING), notes, "the campaign's update time"),
    }


def _bounded(raw: dict, key: str, notes: Notes, what: str) -> str:
    """A protected field as text, cut to its bound (engine.budget.standing)
    with the cut and its size in the report: every prompt carries it whole,
    so a longer one would leave the campaign unable to play a turn."""
    kept, cut_note = standing.cut(key, string(raw.get(key, MISSING), notes, what))
    if cut_note:
        notes.repair(cut_note)
    return kept


def _canon(value: Any, notes: Notes) -> dict:
    """The canon object as given, its rules cut to the canon's bound when they pass it."""
    canon = json_object(value, notes, "the campaign canon")
    rules = canon.get("rules")
    if rules is None:
        return canon
    if not isinstance(rules, list):
        # The prompt lists each rule a line; a string would be read a
        # character at a time, so it becomes the one rule it says.
        notes.repair("the campaign canon's rules were not a list; "
                     + ("the text became its one rule" if isinstance(rules, str) else "they were cleared"))
        rules = [rules] if isinstance(rules, str) else []
        canon = {**canon, "rules": rules}
    kept, cut_note = standing.cut_rules(rules)
    if cut_note is None:
        return canon
    notes.repair(cut_note)
    return {**canon, "rules": kept}  # a new object: the given one is left as it was


def read_v1(payload: dict, format_name: str = f"{FORMAT} v1") -> Plan:
    """Every check, no writes: a Plan, or BundleRefused saying why not."""
    notes = Notes()
    campaign = read_campaign(payload.get("campaign", MISSING), notes)
    branches, nodes, head, lines = read_tree(payload.get("branches", MISSING), payload.get("nodes", MISSING),
                                             payload.get("head", MISSING), notes)
    events = read_events(payload.get("state_events", MISSING), {n.key for n in nodes}, notes)
    knowledge = read_knowledge(payload.get("knowledge", MISSING), notes)
    return Plan(
        format=format_name, campaign=campaign, branches=branches, nodes=nodes, head=head,
        save_points=read_save_points(payload.get("save_points", MISSING), lines, notes),
        memories=read_memories(payload.get("memories", MISSING), lines, notes),
        summaries=read_summaries(payload.get("summaries", MISSING), lines, notes),
        events=events, knowledge=knowledge,
        cards=read_cards(payload.get("story_cards", MISSING), notes), notes=notes,
        visual_profiles=read_visual_profiles(payload.get("visual_profiles", MISSING), notes),
    )


def read_v2(payload: dict) -> Plan:
    """Version 1's checks, then the prompt texts its records refer to."""
    plan = read_v1(payload, f"{FORMAT} v2")
    plan.texts, moved = _prompt_texts(payload.get("prompt_texts", MISSING), plan.notes)
    for node in plan.nodes:
        if node.record is None:
            continue
        report = _moved(node.record.report, moved) if moved else node.record.report
        if hashes_of(report) - plan.texts.keys():
            plan.notes.drop("a turn record that refers to prompt text the file lacks was dropped (its narration "
                            "was kept)")
            node.record = None
        else:
            node.record.report = report
    return plan


def _prompt_texts(raw: Any, notes: Notes) -> tuple[dict[str, str], dict[str, str]]:
    """({hash: text} keyed by each text's true hash, {hash in the file: true hash} where they differ)."""
    if raw is MISSING:
        return {}, {}
    if not isinstance(raw, dict):
        notes.drop("the prompt texts were not a mapping; the turn records that need them were dropped")
        return {}, {}
    texts, moved = {}, {}
    for key, value in raw.items():
        if not isinstance(value, str):
            notes.drop("a prompt text that was not text was dropped")
            continue
        true = text_hash(value)
        texts[true] = value
        if key != true:
            moved[key] = true
    if moved:
        notes.repair("a prompt text whose hash did not match it was filed under its own hash")
    return texts, moved


def _moved(value: Any, moved: dict[str, str]) -> Any:
    if isinstance(value, list):
        return [_moved(v, moved) for v in value]
    if isinstance(value, dict):
        return {k: moved.get(v, v) if k.endswith(REF) and isinstance(v, str) else _moved(v, moved)
                for k, v in value.items()}
    return value
