"""Campaign bundles of the reference web app ("ai-dnd-adventure-v1/v2/v3").

Each is translated into this workbench's own bundle shape and then checked
by the same reader, so an old file passes exactly the checks a new one does.
The rule for older eras: absent means the format could not say. A file
without a head opens at its tip; a file without state events gets none (an
audit trail rebuilt from snapshots would be a guess presented as a record).

What our model has no place for is listed in the import report, never
silently lost: per-turn change summaries, state proposals, persona details,
scripting state, the legacy summary mirror. Visual profiles (`visualProfiles`,
the reference's media seam) are carried, into engine.media's table.
"""
from __future__ import annotations

import base64
import copy
import zlib
from typing import Any

from ..story.lineage import DEEPEST
from . import limits
from .errors import BundleRefused
from .fields import MISSING, is_whole
from .loading import parse_json
from .native import read_v1
from .plan import Notes, Plan
from .tree import read_branches, walk

__all__ = ["FORMATS", "LEGACY_FORMAT", "TREE_FORMAT", "CURRENT_FORMAT", "read", "translate"]

CURRENT_FORMAT = "ai-dnd-adventure-v3"
TREE_FORMAT = "ai-dnd-adventure-v2"
LEGACY_FORMAT = "ai-dnd-adventure-v1"
FORMATS = (CURRENT_FORMAT, TREE_FORMAT, LEGACY_FORMAT)

# The reference's action types, as this workbench's node kinds. "story" is
# text the player wrote into the story themselves: a player input.
KIND_OF = {"start": "start", "do": "player", "say": "player", "story": "player", "ai": "narrator",
           "continue": "narrator", "direct": "direction", "direction": "direction"}
SOURCE_OF = {"manual_correction": "correction", "correction": "correction", "accepted_story": "narrator",
             "narrator": "narrator", "ai": "narrator"}
_EVENT_META = {"eventType", "type", "action", "actionId", "source", "id", "proposalId", "proposal", "createdAt",
               "before", "after", "accepted", "reason", "note"}
_IGNORED = {
    "scriptState": "scripting state (scripts are never run here)",
    "scripts": "scripts (never run here)",
    "worldState": "the legacy world state",
    "placeholders": "scenario placeholder answers",
    "personaPronouns": "the persona's pronouns",
    "personaDesc": "the persona's description",
    "persona": "the persona",
}


def _get(row: dict, *names: str, default: Any = MISSING) -> Any:
    for name in names:
        if name in row:
            return row[name]
    return default


def read(payload: dict) -> Plan:
    """Translate, then check with this workbench's own reader."""
    notes = Notes()
    native = translate(payload, notes)
    plan = read_v1(native, format_name=payload["format"])
    plan.notes.merge(notes)
    return plan


def translate(payload: dict, notes: Notes) -> dict:
    for key, words in _IGNORED.items():
        if payload.get(key) not in (None, "", [], {}):
            notes.lose(f"{words} ({key})")
    if isinstance(payload.get("storySummary"), str) and payload["storySummary"].strip() \
            and not payload.get("summaries"):
        notes.lose("the legacy summary text (storySummary): its format gave it no place in the story, so it was "
                   "not turned into a summary")
    if payload["format"] == LEGACY_FORMAT:
        tree = _flat(payload, notes)
    else:
        tree = _tree(payload, notes)
    return {**tree, "campaign": _campaign(payload), **_sections(payload, tree, notes)}


def _campaign(p: dict) -> dict:
    persona = p.get("personaName")
    return {
        "title": p.get("title", MISSING), "premise": _get(p, "memory", "premise"),
        "protagonist": persona if isinstance(persona, str) else _get(p, "protagonist"),
        "ai_instructions": _get(p, "aiInstructions", "ai_instructions"),
        "authors_note": _get(p, "authorsNote", "authors_note"),
        "narration_length": _get(p, "narrationLength", default=""),
        "canon": _get(p, "campaignCanon"), "state": _get(p, "narrativeState"),
        "created_at": _get(p, "createdAt"), "updated_at": _get(p, "updatedAt"),
    }


# ------------------------------------------------------------------ v2 / v3: the tree
def _tree(p: dict, notes: Notes) -> dict:
    raw_branches = p.get("branches", MISSING)
    if raw_branches is MISSING:
        raw_branches = [{"id": 0}]
    if not isinstance(raw_branches, list):
        raise BundleRefused("The file's branches must be a list. Nothing was imported.")
    branches = [_branch(b) for b in raw_branches]
    # Checked as this workbench's reader checks them, before anything walks
    # the tree: ids present and unique, each parent listed earlier. A branch
    # that lost its id once took its position as id, became its own parent
    # and sent the walk below round for ever.
    read_branches(branches, Notes())
    root = branches[0]["id"]
    actions = p.get("actions", [])
    if not isinstance(actions, list):
        raise BundleRefused("The file's actions must be a list. Nothing was imported.")
    with_ids = all(isinstance(a, dict) and "id" in a for a in actions)
    inflater = _Inflater()
    nodes = [_node(a, i, with_ids, root, notes, inflater) for i, a in enumerate(actions)]
    if not with_ids:
        _derive_parents(branches, nodes, notes)
    head = {"branch": p.get("headBranch")}
    if "headDepth" in p:
        head["depth"] = p["headDepth"]
    return {"branches": branches, "nodes": nodes, "head": head}


def _branch(row: Any) -> Any:
    if not isinstance(row, dict):
        return row
    out = {"id": _get(row, "id"), "parent": _get(row, "parent", "parentId", default=None),
           "created_at": _get(row, "createdAt")}
    fork = _get(row, "forkDepth", "fork_depth")
    if fork is not MISSING:
        out["fork_depth"] = fork
    return out


def _node(row: Any, position: int, with_ids: bool, root: int, notes: Notes, inflater: _Inflater) -> Any:
    if not isinstance(row, dict):
        return row
    kind = row.get("type")
    snapshot = _snapshot(row, notes, inflater)
    if row.get("stateChanges") not in (None, "", [], {}):
        notes.lose("per-turn change summaries (stateChanges): the state snapshots themselves are carried")
    node = {
        "id": row["id"] if with_ids else position + 1,
        "branch": _get(row, "branch", "branchId", default=root), "depth": _get(row, "depth"),
        "parent": row.get("parentId") if with_ids else None,
        "kind": KIND_OF.get(kind, kind), "text": row.get("text"), "raw_text": _get(row, "rawOutput"),
        "reasoning": row.get("reasoning"), "live": row.get("live", True), "edited": _get(row, "edited"),
        "state_after": _get(row, "narrativeStateAfter"), "created_at": _get(row, "createdAt"),
    }
    if snapshot is not None and node["kind"] == "narrator":
        node["record"] = {"narrator": snapshot.get("model") if isinstance(snapshot.get("model"), str) else "",
                          "report": snapshot, "usage": snapshot.get("usage"),
                          "accounting": snapshot.get("accounting"), "window": snapshot.get("window")}
    return node


def _snapshot(row: dict, notes: Notes, inflater: _Inflater) -> dict | None:
    """The stored prompt, verbatim or not at all; an impossible knowledge
    source id inside it becomes None rather than point at some other source."""
    value = row.get("contextSnapshot")
    if value is None and row.get("contextSnapshotZ") is not None:
        value = inflater.unpack(row["contextSnapshotZ"])
        if value is None:
            notes.drop("a compressed prompt snapshot could not be read and was dropped (its narration was kept)")
            return None
    if value is None:
        return None
    if not isinstance(value, dict):
        notes.drop("a prompt snapshot that was not an object was dropped (its narration was kept)")
        return None
    knowledge = value.get("knowledge")
    used = knowledge.get("used") if isinstance(knowledge, dict) else knowledge
    impossible = [i for i, item in enumerate(used if isinstance(used, list) else [])
                  if isinstance(item, dict) and "source_id" in item
                  and not (is_whole(item["source_id"]) and item["source_id"] > 0)]
    if not impossible:
        return value
    value = copy.deepcopy(value)  # the caller's file is never changed
    knowledge = value["knowledge"]
    used = knowledge["used"] if isinstance(knowledge, dict) else knowledge
    for i in impossible:
        used[i]["source_id"] = None
        notes.repair("a prompt snapshot named an impossible knowledge source id; it was cleared")
    return value


class _Inflater:
    """Inflates compressed snapshots within a budget for the whole file, so a
    zip bomb costs at most `limits.MAX_SNAPSHOT_BYTES` per snapshot and
    `limits.MAX_INFLATED_BYTES` in all, never what it claims to hold."""

    def __init__(self) -> None:
        self.left = limits.MAX_INFLATED_BYTES

    def unpack(self, blob: Any) -> dict | None:
        """base64 of zlib or gzip JSON (the reference's two packings), or None."""
        if not isinstance(blob, str):
            return None
        try:
            raw = base64.b64decode(blob, validate=True)
        except ValueError:
            return None
        cap = max(0, min(limits.MAX_SNAPSHOT_BYTES, self.left))
        inflater = zlib.decompressobj(wbits=47)  # 32 + 15: zlib or gzip, told apart by the header
        try:
            inflated = inflater.decompress(raw, cap + 1)
        except zlib.error:
            return None
        self.left -= len(inflated)
        if len(inflated) > cap:
            return None
        try:
            found = parse_json(inflated, "A compressed prompt snapshot")
        except BundleRefused:
            return None
        return found if isinstance(found, dict) else None


def _derive_parents(branches: list, nodes: list, notes: Notes) -> None:
    """A file from before take parentage was recorded: each node's parent is
    the node one level up on its own line, which is how this workbench links
    every node it writes. `branches` has passed `read_branches`, so every
    walk here ends at the root."""
    table = {b["id"]: (b["parent"], b.get("fork_depth", -1)) for b in branches}
    at = {(n["branch"], n["depth"]): n for n in nodes if isinstance(n, dict)}
    linked = 0
    for node in nodes:
        if not isinstance(node, dict) or not is_whole(node.get("depth")) or node["depth"] < 1:
            continue
        if not is_whole(node.get("branch")) or node["branch"] not in table:
            continue  # the reader will refuse the node and say why
        owner = walk(table, node["branch"], DEEPEST).branch_at(node["depth"] - 1)
        parent = at.get((owner, node["depth"] - 1))
        if parent is not None:
            node["parent"] = parent["id"]
            linked += 1
    if linked:
        notes.repair("take parentage, which this file's format did not record, was read from the tree")


# ------------------------------------------------------------------ v1: the flat list
def _flat(p: dict, notes: Notes) -> dict:
    """The first format: one list, retries as `variants` with the chosen one
    at `variantIndex`. Every variant becomes a take; the chosen one is live
    and carries the story on."""
    actions = p.get("actions", [])
    if not isinstance(actions, list):
        raise BundleRefused("The file's actions must be a list. Nothing was imported.")
    rows = [a for a in actions if isinstance(a, dict)]
    if len(rows) != len(actions):
        raise BundleRefused("An entry of the file's actions is not an object. Nothing was imported.")
    rows.sort(key=lambda a: a["index"] if is_whole(a.get("index")) else 0)
    branches, nodes, parent = [{"id": 0, "parent": None}], [], None
    for depth, action in enumerate(rows):
        parent = _flat_action(action, depth, parent, branches, nodes)
    return {"branches": branches, "nodes": nodes, "head": {"branch": 0}}


def _flat_action(action: dict, depth: int, parent: int | None, branches: list, nodes: list) -> int:
    """Append one action's node(s); return the id of the one the story goes on from."""
    kind = KIND_OF.get(action.get("type"), action.get("type"))
    variants = action.get("variants")
    if not (isinstance(variants, list) and variants and all(isinstance(v, str) for v in variants)):
        nodes.append({"id": len(nodes) + 1, "branch": 0, "depth": depth, "parent": parent, "kind": kind,
                      "text": action.get("text"), "live": True})
        return len(nodes)
    chosen = action.get("variantIndex")
    chosen = chosen if is_whole(chosen) and 0 <= chosen < len(variants) else len(variants) - 1
    main = None
    for i, text in enumerate(variants):
        branch = 0
        if i != chosen:
            branch = len(branches)
            branches.append({"id": branch, "parent": 0, "fork_depth": depth - 1})
        nodes.append({"id": len(nodes) + 1, "branch": branch, "depth": depth, "parent": parent, "kind": kind,
                      "text": text, "live": i == chosen})
        main = len(nodes) if i == chosen else main
    return main


# ------------------------------------------------------------------ the rest
def _sections(p: dict, tree: dict, notes: Notes) -> dict:
    action_ids = {n["id"] for n in tree["nodes"] if isinstance(n, dict)}
    _check_proposals(p.get("stateProposals", MISSING), action_ids, notes)
    return {
        "save_points": _each(p.get("checkpoints", MISSING), lambda c: {
            "name": c.get("name"), "note": _get(c, "note"), "branch": c.get("branch"), "depth": c.get("depth"),
            "created_at": _get(c, "createdAt")}),
        "memories": _each(p.get("memories", MISSING), lambda m: {
            "text": m.get("text"), "branch": m.get("branch"), "depth": m.get("depth"),
            "source_start": _get(m, "sourceStart"), "source_end": _get(m, "sourceEnd"),
            "authority": _get(m, "authority"), "pinned": _get(m, "pinned"), "forgotten": _get(m, "forgotten"),
            "use_count": _get(m, "useCount", default=0), "last_used_at": _get(m, "lastUsedAt"),
            "created_at": _get(m, "createdAt")}),
        "summaries": _each(p.get("summaries", MISSING), lambda s: {
            "text": s.get("text"), "branch": s.get("branch"), "depth": s.get("depth"),
            "source_start": _get(s, "sourceStart"), "source_end": _get(s, "sourceEnd"),
            "trigger": _get(s, "trigger", default="interval"), "model_name": _get(s, "modelName"),
            "created_at": _get(s, "createdAt")}),
        "state_events": _each(p.get("stateEvents", MISSING), lambda e: _event(e, notes)),
        "knowledge": _each(p.get("knowledge", MISSING), lambda k: {
            "title": k.get("title"), "original_filename": _get(k, "originalFilename"),
            "classification": _get(k, "classification"), "enabled": _get(k, "enabled"),
            "visibility": _get(k, "visibility", default="normal"), "always_include": _get(k, "alwaysInclude"),
            "content": k.get("content"), "content_hash": _get(k, "contentHash"), "notes": _get(k, "notes"),
            "media_type": _get(k, "mediaType"), "imported_at": _get(k, "importedAt")}),
        "story_cards": _each(_get(p, "storyCards", "story_cards"), lambda c: {
            "title": c.get("title"), "keys": c.get("keys"), "entry": _get(c, "entry", "value"),
            "card_type": _get(c, "type"), "notes": _get(c, "description", "notes")}),
        "visual_profiles": _each(p.get("visualProfiles", MISSING), lambda v: {
            "entity_key": _get(v, "entityKey", "entity_key", default=None), "descriptors": v.get("descriptors"),
            "features": v.get("features"), "style_notes": _get(v, "styleNotes", "style_notes", default=None),
            "created_at": _get(v, "createdAt"), "updated_at": _get(v, "updatedAt")}),
    }


def _each(section: Any, convert) -> Any:
    """Convert the entries that are objects; anything else is passed on for
    the reader to refuse or drop by its own rules."""
    if not isinstance(section, list):
        return section
    return [convert(row) if isinstance(row, dict) else row for row in section]


def _event(e: dict, notes: Notes) -> dict:
    payload = next((e[k] for k in ("payload", "event", "data") if isinstance(e.get(k), dict)), None)
    if payload is None:
        payload = {k: v for k, v in e.items() if k not in _EVENT_META}
    if e.get("before") is not None or e.get("after") is not None:
        notes.lose("the before/after values kept on each state event (the snapshots on the turns are carried)")
    source = e.get("source")
    return {"node": _get(e, "action", "actionId", default=None), "source": SOURCE_OF.get(source, source),
            "event": {"type": _get(e, "eventType", "type", default=None), **payload},
            "accepted": e.get("accepted", True), "reason": _get(e, "reason"), "note": _get(e, "note"),
            "created_at": _get(e, "createdAt")}


def _check_proposals(section: Any, action_ids: set, notes: Notes) -> None:
    """Proposals have no table here, but a malformed section is still refused:
    it says the audit trail of the file is damaged."""
    if section is MISSING or section is None:
        return
    if not isinstance(section, list):
        raise BundleRefused("The file's state proposals must be a list. Nothing was imported.")
    for i, row in enumerate(section):
        if not isinstance(row, dict):
            raise BundleRefused(f"State proposal {i + 1} is not an object. Nothing was imported.")
        action = row.get("action", row.get("actionId"))
        if action is not None and action not in action_ids:
            raise BundleRefused(f"State proposal {i + 1} names action {action!r}, which is not in the file. "
                                "Nothing was imported.")
    if section:
        notes.lose("state proposals (the raw blocks each narration proposed); the events they led to are carried")
