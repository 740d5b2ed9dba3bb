"""Checking the parts of a file that hang off the story: save points,
memories, summaries and the state-event audit trail.

One question decides each field: would a wrong value here make the rest of
the campaign wrong?

- the audit trail is refused when malformed: an event pinned to a turn that
  is not there, or with no type, would be a false record;
- a save point or summary that cannot be placed exactly is dropped, never
  moved to a nearby place (a bookmark pointing somewhere else is worse than
  none; a summary placed at a guess would be read on the wrong line);
- a section that is not a list costs only that section.
"""
from __future__ import annotations

from typing import Any

from ..errors import ProfileError
from ..media import profiles
from ..memory.authority import ACCEPTED, HEURISTIC, classify_authority
from ..story.tree import RESTING
from .errors import BundleRefused
from .fields import MISSING, flag, is_whole, moment, optional_moment, optional_whole, string
from .plan import EventPlan, MemoryPlan, Notes, ProfilePlan, SavePointPlan, SummaryPlan
from .tree import Lines

__all__ = ["TRIGGERS", "read_events", "read_memories", "read_save_points", "read_summaries", "read_visual_profiles"]

TRIGGERS = ("interval", "manual")


def _optional_list(raw: Any, notes: Notes, what: str) -> list:
    """A section that only matters to itself: not a list costs the section."""
    if raw is MISSING or raw is None:
        return []
    if not isinstance(raw, list):
        notes.drop(f"the {what} section was not a list, so no {what} were imported (the story is intact)")
        return []
    return raw


# ------------------------------------------------------------------ save points
def read_save_points(raw: Any, lines: Lines, notes: Notes) -> list[SavePointPlan]:
    out = []
    for row in _optional_list(raw, notes, "save points"):
        if not isinstance(row, dict):
            notes.drop("a save point that was not an object was dropped")
            continue
        name = row.get("name")
        if not isinstance(name, str) or not name.strip():
            notes.drop("a save point with a blank name was dropped")
            continue
        branch, depth = row.get("branch", MISSING), row.get("depth", MISSING)
        if not is_whole(branch) or branch not in lines.table:
            notes.drop(f"save point “{name.strip()[:60]}” was on a branch the file does not list, and was dropped")
            continue
        node = lines.node_at(branch, depth) if is_whole(depth) else None
        if node is None or node.kind not in RESTING:
            notes.drop(f"save point “{name.strip()[:60]}” pointed at no opening or narration on its line, and "
                       "was dropped (never moved to a nearby place)")
            continue
        out.append(SavePointPlan(name.strip()[:200], string(row.get("note", MISSING), notes, "a save point's note"),
                                 branch, depth, moment(row.get("created_at", MISSING), notes, "a save point's time")))
    return out


# ------------------------------------------------------------------ memories
def read_memories(raw: Any, lines: Lines, notes: Notes) -> list[MemoryPlan]:
    out = []
    for row in _optional_list(raw, notes, "memories"):
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
            notes.drop("a memory with no text was dropped")
            continue
        branch = row.get("branch")
        if branch is not None and (not is_whole(branch) or branch not in lines.table):
            notes.drop("a memory on a branch the file does not list was dropped")
            continue
        out.append(_memory(row, branch, notes))
    return out


def _memory(row: dict, branch: int | None, notes: Notes) -> MemoryPlan:
    text = row["text"]
    authority = row.get("authority", MISSING)
    if authority not in (ACCEPTED, HEURISTIC):
        if authority is not MISSING:
            notes.repair("a memory's authority was unknown; it was judged again from its text")
        authority = classify_authority(text)
    use_count = row.get("use_count", 0)
    if not is_whole(use_count) or use_count < 0:
        notes.repair("a memory's use count was not a count; set to 0")
        use_count = 0
    return MemoryPlan(
        text=text, branch=branch, depth=optional_whole(row.get("depth"), notes, "a memory's depth"),
        source_start=optional_whole(row.get("source_start"), notes, "a memory's source start"),
        source_end=optional_whole(row.get("source_end"), notes, "a memory's source end"),
        authority=authority,
        pinned=flag(row.get("pinned", MISSING), notes, "a memory's pinned flag", False),
        forgotten=flag(row.get("forgotten", MISSING), notes, "a memory's forgotten flag", False),
        use_count=use_count,
        last_used_at=optional_moment(row.get("last_used_at", MISSING), notes, "a memory's last use"),
        created_at=moment(row.get("created_at", MISSING), notes, "a memory's creation time"),
    )


# ------------------------------------------------------------------ summaries
def read_summaries(raw: Any, lines: Lines, notes: Notes) -> list[SummaryPlan]:
    out = []
    for row in _optional_list(raw, notes, "summaries"):
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            notes.drop("a summary with no text was dropped")
            continue
        branch, depth = row.get("branch"), row.get("depth")
        if not is_whole(branch) or branch not in lines.table or not is_whole(depth) or depth < 0:
            notes.drop("a summary with no place in the story was dropped (placing it at a guess would show it "
                       "on the wrong line)")
            continue
        trigger = row.get("trigger", "interval")
        if trigger not in TRIGGERS:
            notes.repair("a summary's trigger was unknown; read as 'interval'")
            trigger = "interval"
        out.append(SummaryPlan(
            text=row["text"], branch=branch, depth=depth,
            source_start=optional_whole(row.get("source_start"), notes, "a summary's source start"),
            source_end=optional_whole(row.get("source_end"), notes, "a summary's source end"),
            trigger=trigger, model_name=string(row.get("model_name", MISSING), notes, "a summary's model", limit=200),
            created_at=moment(row.get("created_at", MISSING), notes, "a summary's creation time"),
        ))
    return out


# ------------------------------------------------------------------ events
def read_events(raw: Any, node_keys: set[int], notes: Notes) -> list[EventPlan]:
    """The audit trail arrives whole or the file is refused."""
    if raw is MISSING or raw is None:
        return []
    if not isinstance(raw, list):
        raise BundleRefused("The file's state events must be a list, and they are "
                            f"a {type(raw).__name__}. Nothing was imported.")
    return [_event(row, i, node_keys, notes) for i, row in enumerate(raw)]


def _event(row: Any, position: int, node_keys: set[int], notes: Notes) -> EventPlan:
    where = f"State event {position + 1}"
    if not isinstance(row, dict):
        raise BundleRefused(f"{where} is not an object. Nothing was imported.")
    node = row.get("node")
    if node is not None and (not is_whole(node) or node not in node_keys):
        raise BundleRefused(f"{where} names story node {node!r}, which is not in the file. Nothing was imported.")
    source = row.get("source")
    if not isinstance(source, str) or not source.strip():
        raise BundleRefused(f"{where} does not say where it came from (its source). Nothing was imported.")
    accepted = row.get("accepted", True)
    if not isinstance(accepted, bool):
        raise BundleRefused(f"{where} does not say whether it was accepted. Nothing was imported.")
    event = row.get("event", MISSING)
    if not isinstance(event, dict):
        raise BundleRefused(f"{where} carries no event object. Nothing was imported.")
    kind = event.get("type")
    if accepted and (not isinstance(kind, str) or not kind.strip()):
        raise BundleRefused(f"{where} was applied but has no event type. Nothing was imported.")
    return EventPlan(
        node=node, source=source[:20], event=event, accepted=accepted,
        reason=string(row.get("reason", MISSING), notes, "a state event's reason"),
        note=string(row.get("note", MISSING), notes, "a state event's note"),
        created_at=moment(row.get("created_at", MISSING), notes, "a state event's time"),
    )


# ------------------------------------------------------------------ visual profiles
def read_visual_profiles(raw: Any, notes: Notes) -> list[ProfilePlan]:
    """Profiles are presentation, never story: a malformed one costs itself.
    The entity need not exist in the file's state (a profile waits for its
    entity, and one that never comes is simply never shown)."""
    out, seen = [], set()
    for row in _optional_list(raw, notes, "visual profiles"):
        try:
            if not isinstance(row, dict):
                raise ProfileError("not an object")
            key = profiles.checked_key(row.get("entity_key"))
            values = profiles.checked(row.get("descriptors"), row.get("features"), row.get("style_notes"))
        except ProfileError:
            notes.drop("a visual profile with no entity key, or with descriptors, features or style notes of the "
                       "wrong shape or length, was dropped")
            continue
        if key in seen:
            notes.drop("a second visual profile for the same entity was dropped (the first was kept)")
            continue
        seen.add(key)
        out.append(ProfilePlan(key, **values,
                               created_at=moment(row.get("created_at", MISSING), notes, "a visual profile's time"),
                               updated_at=moment(row.get("updated_at", MISSING), notes, "a visual profile's time")))
    return out
