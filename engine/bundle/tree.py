"""Checking a file's story tree: refuse what would misplace or hole the story.

The rules, in the order they are applied:

- branches: the first is the root (no parent); every other forks from a
  branch listed before it, at a whole depth, so the graph is acyclic by
  construction;
- nodes: unique ids, on a listed branch, at a whole depth the branch owns
  (deeper than its fork), one per coordinate, and never a hole: a node at
  depth d has a node at d-1 on its own line;
- take parentage is the one part of a node that may be repaired: a parent
  that is unknown, the node itself, or not one level up is cleared;
- each take group (same depth, same parent) gets exactly one live take;
- the head: an unknown branch falls back to the root, a missing depth to the
  deepest narration on its line; a depth past the line, of the wrong type,
  or on an input is refused.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Any

from ..errors import BrokenStory
from ..story.lineage import DEEPEST, Path, path_to
from ..story.tree import RESTING
from . import limits
from .errors import BundleRefused
from .fields import MISSING, flag, is_whole, json_object, moment, state_document, string
from .plan import BranchPlan, NodePlan, Notes, RecordPlan

__all__ = ["KINDS", "Lines", "check_holes", "link_parents", "place_head", "read_branches", "read_nodes",
           "read_record", "read_tree", "settle_live", "walk"]

KINDS = ("start", "player", "direction", "narrator")


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise BundleRefused(f"The file's {what} must be a list, and it is {_kind(value)}. Nothing was imported.")
    return value


def _kind(value: Any) -> str:
    return "missing" if value is MISSING else f"a {type(value).__name__}" if value is not None else "null"


# ------------------------------------------------------------------ branches
def read_branches(raw: Any, notes: Notes) -> list[BranchPlan]:
    rows = _list(raw, "branches")
    if not rows:
        raise BundleRefused("The file lists no branches, so its story has nowhere to stand. Nothing was imported.")
    if len(rows) > limits.MAX_BRANCHES:
        raise BundleRefused(f"The file has {len(rows):,} branches, past this workbench's limit of "
                            f"{limits.MAX_BRANCHES:,}. Nothing was imported.")
    seen: dict[int, int] = {}
    out = []
    for position, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BundleRefused(f"Branch entry {position + 1} is not an object. Nothing was imported.")
        key = row.get("id", MISSING)
        if key is MISSING or key is None:
            raise BundleRefused(f"Branch entry {position + 1} has no id, so the story nodes on it cannot be told "
                                "from those of another branch. Nothing was imported.")
        if not is_whole(key):
            raise BundleRefused(f"Branch entry {position + 1} has the id {key!r}; a branch's id is a whole number. "
                                "Nothing was imported.")
        if key in seen:
            raise BundleRefused(f"Branch entries {seen[key] + 1} and {position + 1} both call themselves {key}. "
                                "Nothing was imported.")
        seen[key] = position
        out.append(_branch(row, key, position, seen, notes))
    return out


def _branch(row: dict, key: int, position: int, seen: dict[int, int], notes: Notes) -> BranchPlan:
    parent = row.get("parent")
    created = moment(row.get("created_at", MISSING), notes, "a branch's creation time")
    if position == 0:
        if parent is not None:
            raise BundleRefused(f"The first branch ({key}) must be the root, but it forks from branch {parent}, "
                                "which would be listed after it. Nothing was imported.")
        if row.get("fork_depth", -1) != -1:
            notes.repair("the root branch named a fork depth; a root has none, so it was cleared")
        return BranchPlan(key, None, -1, created)
    if parent is None:
        raise BundleRefused(f"Branch {key} has no parent, but only the first branch may be the root. "
                            "Nothing was imported.")
    if parent == key:
        raise BundleRefused(f"Branch {key} forks from itself. Nothing was imported.")
    if not is_whole(parent) or parent not in seen:
        raise BundleRefused(f"Branch {key} forks from branch {parent!r}, which is not listed before it (a branch "
                            "may only fork from an earlier one). Nothing was imported.")
    fork = row.get("fork_depth", MISSING)
    if fork is MISSING or fork is None:
        raise BundleRefused(f"Branch {key} has no fork depth, so where it leaves its parent is unknown. "
                            "Nothing was imported.")
    if not is_whole(fork) or fork < -1:
        raise BundleRefused(f"Branch {key} has fork depth {fork!r}; it must be a whole number of at least -1. "
                            "Nothing was imported.")
    return BranchPlan(key, parent, fork, created)


# ------------------------------------------------------------------ nodes
def read_nodes(raw: Any, branches: list[BranchPlan], notes: Notes) -> list[NodePlan]:
    rows = _list(raw, "nodes")
    if len(rows) > limits.MAX_NODES:
        raise BundleRefused(f"The file has {len(rows):,} story nodes, past this workbench's limit of "
                            f"{limits.MAX_NODES:,}. Nothing was imported.")
    forks = {b.key: b.fork_depth for b in branches}
    states: dict[str, int] = {}  # each distinct state snapshot is measured once
    seen: set[int] = set()
    taken: dict[tuple[int, int], int] = {}
    nodes = []
    for position, row in enumerate(rows):
        node = _node(row, position, forks, notes, states)
        if node.key in seen:
            raise BundleRefused(f"Two story nodes both call themselves {node.key}. Nothing was imported.")
        seen.add(node.key)
        coordinate = (node.branch, node.depth)
        if coordinate in taken:
            raise BundleRefused(f"Nodes {taken[coordinate]} and {node.key} are both at depth {node.depth} of branch "
                                f"{node.branch}; a place in the story holds one node. Nothing was imported.")
        taken[coordinate] = node.key
        nodes.append(node)
    return nodes


def _node(row: Any, position: int, forks: dict[int, int], notes: Notes, states: dict[str, int]) -> NodePlan:
    if not isinstance(row, dict):
        raise BundleRefused(f"Story node entry {position + 1} is not an object. Nothing was imported.")
    key = row.get("id", MISSING)
    if not is_whole(key):
        raise BundleRefused(f"Story node entry {position + 1} has no whole-number id. Nothing was imported.")
    branch = row.get("branch", MISSING)
    if not is_whole(branch) or branch not in forks:
        raise BundleRefused(f"Story node {key} is on branch {branch!r}, which the file does not list. "
                            "Nothing was imported.")
    depth = row.get("depth", MISSING)
    if depth is MISSING or depth is None:
        raise BundleRefused(f"Story node {key} has no depth, so its place in the story is unknown. "
                            "Nothing was imported.")
    if not is_whole(depth) or depth < 0:
        raise BundleRefused(f"Story node {key} has depth {depth!r}; a depth is a whole number from 0. "
                            "Nothing was imported.")
    if depth <= forks[branch]:
        raise BundleRefused(f"Story node {key} is at depth {depth} of branch {branch}, which forks at depth "
                            f"{forks[branch]} and so owns only deeper places. Nothing was imported.")
    kind = row.get("kind", MISSING)
    if kind not in KINDS:
        raise BundleRefused(f"Story node {key} is of kind {kind!r}; the kinds are {', '.join(KINDS)}. "
                            "Nothing was imported.")
    text = row.get("text", MISSING)
    if not isinstance(text, str):
        raise BundleRefused(f"Story node {key} has no text. Nothing was imported.")
    parent = row.get("parent")
    node = NodePlan(
        key=key, branch=branch, depth=depth, parent=parent if parent is not None else None, kind=kind, text=text,
        raw_text=string(row.get("raw_text", MISSING), notes, "a node's raw text", default=text),
        reasoning=_reasoning(row.get("reasoning", MISSING), notes),
        live=flag(row.get("live", MISSING), notes, "a node's live flag", default=False),
        edited=flag(row.get("edited", MISSING), notes, "a node's edited flag", default=False),
        state_after=state_document(row.get("state_after", MISSING), notes, "a node's state snapshot", states),
        created_at=moment(row.get("created_at", MISSING), notes, "a node's creation time"),
    )
    node.record = read_record(row.get("record", MISSING), node, notes)
    return node


def _reasoning(value: Any, notes: Notes) -> str | None:
    if value is MISSING or value is None or isinstance(value, str):
        return None if value is MISSING else value
    notes.repair("a node's reasoning was not text; left empty")
    return None


def read_record(value: Any, node: NodePlan, notes: Notes) -> RecordPlan | None:
    """A narration's record is restored verbatim or not at all: a prompt
    report that is not an object is evidence of nothing, so it is dropped."""
    if value is MISSING or value is None:
        return None
    if node.kind != "narrator":
        notes.drop("a turn record on a node that is not a narration was dropped")
        return None
    if not isinstance(value, dict) or not isinstance(value.get("report", {}), dict):
        notes.drop("a turn record whose prompt report was malformed was dropped (its narration was kept)")
        return None
    return RecordPlan(
        narrator=string(value.get("narrator", MISSING), notes, "a turn record's narrator", limit=200),
        report=json_object(value.get("report", MISSING), notes, "a turn record's report"),
        usage=json_object(value.get("usage", MISSING), notes, "a turn record's usage"),
        accounting=json_object(value.get("accounting", MISSING), notes, "a turn record's accounting"),
        window=json_object(value.get("window", MISSING), notes, "a turn record's window"),
        timings=json_object(value.get("timings", MISSING), notes, "a turn record's timings"),
    )


# ------------------------------------------------------------------ lines
def walk(table: dict, branch: Any, depth: int) -> Path:
    """`path_to` for a file: a branch that is its own ancestor is a refusal
    of the file, naming the branch. `read_branches` admits no such table (a
    branch forks only from one listed before it); this holds even if a
    later change lets one through."""
    try:
        return path_to(table, branch, depth)
    except BrokenStory as broken:
        raise BundleRefused(f"The file's branches loop: following branch {broken.branch!r}'s parents leads back to "
                            "it or to a branch the file does not list, so no line of its story can be read. "
                            "Nothing was imported.") from None


class Lines:
    """The tree as the lineage rule sees it, for coordinate questions."""

    def __init__(self, branches: list[BranchPlan], nodes: list[NodePlan]):
        self.root = branches[0].key
        self.table = {b.key: (b.parent, b.fork_depth) for b in branches}
        self.at = {(n.branch, n.depth): n for n in nodes}
        self.depths: dict[int, list[int]] = defaultdict(list)
        for n in sorted(nodes, key=lambda n: n.depth):
            self.depths[n.branch].append(n.depth)
        self._ahead: dict[int, Path] = {}

    def ahead(self, branch: int) -> Path:
        if branch not in self._ahead:
            self._ahead[branch] = walk(self.table, branch, DEEPEST)
        return self._ahead[branch]

    def node_at(self, branch: int, depth: int) -> NodePlan | None:
        """The node at `depth` on `branch`'s line (owned or borrowed)."""
        if depth < 0 or branch not in self.table:
            return None
        owner = self.ahead(branch).branch_at(depth)
        return self.at.get((owner, depth)) if owner is not None else None

    def tip(self, branch: int) -> int:
        """The deepest depth with a node on `branch`'s line (-1: none)."""
        deepest = -1
        for segment in self.ahead(branch).segments:
            owned = self.depths.get(segment.branch_id, [])
            i = bisect_right(owned, segment.last) - 1
            if i >= 0 and owned[i] >= segment.first:
                deepest = max(deepest, owned[i])
        return deepest


def check_holes(lines: Lines, nodes: list[NodePlan]) -> None:
    """A line read from its opening must not skip a depth: the transcript,
    Undo and the history window all count on it."""
    for node in nodes:
        if node.depth > 0 and lines.node_at(node.branch, node.depth - 1) is None:
            raise BundleRefused(f"Story node {node.key} at depth {node.depth} has no node before it on its line "
                                f"(nothing at depth {node.depth - 1}), so the story would have a hole. "
                                "Nothing was imported.")


def link_parents(nodes: list[NodePlan], notes: Notes) -> None:
    """Keep a take's parent only when it is a real node one level up."""
    by_key = {n.key: n for n in nodes}
    for node in nodes:
        if node.parent is None:
            continue
        parent = by_key.get(node.parent) if is_whole(node.parent) else None
        if node.parent == node.key:
            notes.repair("a node named itself as its parent; the link was cleared")
            node.parent = None
        elif parent is None:
            notes.drop("a node's parent link named no node in the file and was dropped")
            node.parent = None
        elif parent.depth != node.depth - 1:
            notes.drop("a node's parent link named a node that is not one level up and was dropped")
            node.parent = None


# ------------------------------------------------------------------ head
def place_head(raw: Any, lines: Lines, notes: Notes) -> tuple[int, int]:
    """Where the story is read from. Only the branch may be repaired: a depth
    that is wrong would open the campaign somewhere its reader never was."""
    raw = raw if isinstance(raw, dict) else {}
    branch = raw.get("branch", MISSING)
    if branch is MISSING or branch is None:
        branch = lines.root
    elif not is_whole(branch) or branch not in lines.table:
        notes.repair(f"the head was on branch {branch!r}, which the file does not list; it was put on the root")
        branch = lines.root
    depth = raw.get("depth", MISSING)
    if depth is MISSING:
        return branch, _deepest_resting(lines, branch)
    if not is_whole(depth):
        raise BundleRefused(f"The head depth must be a whole number, and the file has {depth!r}. "
                            "Nothing was imported.")
    tip = lines.tip(branch)
    if depth < -1 or depth > tip:
        raise BundleRefused(f"The head is at depth {depth}, but its line of the story ends at {tip}. "
                            "Nothing was imported.")
    node = lines.node_at(branch, depth)
    if node is not None and node.kind not in RESTING:
        raise BundleRefused(f"The head rests on a {node.kind} node (depth {depth}); it may only rest on the opening "
                            "or a narration. Nothing was imported.")
    return branch, depth


def _deepest_resting(lines: Lines, branch: int) -> int:
    """The only head an old file without one could have meant: its tip."""
    for depth in range(lines.tip(branch), -1, -1):
        node = lines.node_at(branch, depth)
        if node is not None and node.kind in RESTING:
            return depth
    return -1


# ------------------------------------------------------------------ live takes
def settle_live(nodes: list[NodePlan], lines: Lines, head: tuple[int, int], notes: Notes) -> None:
    """Exactly one live take per turn: the one the head reads through when
    there is one, else the one the file marked, else the newest."""
    on_head = walk(lines.table, head[0], head[1])
    groups: dict[tuple[int, int | None], list[NodePlan]] = defaultdict(list)
    for node in nodes:
        groups[(node.depth, node.parent)].append(node)
    for group in groups.values():
        live = [n for n in group if n.live]
        if len(live) == 1:
            continue
        pool = live or group
        chosen = next((n for n in pool if on_head.contains(n.branch, n.depth)), pool[-1])
        for n in group:
            n.live = n is chosen
        notes.repair("a turn with no live take had one made live" if not live
                     else "a turn with several live takes was left with one")


def read_tree(raw_branches: Any, raw_nodes: Any, raw_head: Any, notes: Notes):
    """Branches, nodes and head, checked together; pure."""
    branches = read_branches(raw_branches, notes)
    nodes = read_nodes(raw_nodes, branches, notes) if raw_nodes is not MISSING else []
    link_parents(nodes, notes)
    lines = Lines(branches, nodes)
    check_holes(lines, nodes)
    head = place_head(raw_head, lines, notes)
    settle_live(nodes, lines, head, notes)
    return branches, nodes, head, lines
