"""What an import will write, once every check has passed.

Every reader (this workbench's own bundles, older formats, AI Dungeon,
SillyTavern) ends in a `Plan`: plain values, keyed by the file's own ids,
with nothing left to decide. The writer only copies a plan into rows, so
all judgement (refuse, repair, drop) lives in pure code that tests can call
without a database.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "BranchPlan", "CardPlan", "EventPlan", "KnowledgePlan", "MemoryPlan", "NodePlan", "Notes", "Plan",
    "ProfilePlan", "RecordPlan", "SavePointPlan", "SummaryPlan",
]


class Notes:
    """What a reader changed on the way in, in words, for the import report.

    The same repair on 300 nodes is one line with a count, not 300 lines: the
    report is read by a person."""

    def __init__(self) -> None:
        self._repaired: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self.not_carried: list[str] = []
        self.warnings: list[str] = []

    def repair(self, message: str) -> None:
        self._repaired[message] = self._repaired.get(message, 0) + 1

    def drop(self, message: str) -> None:
        self._dropped[message] = self._dropped.get(message, 0) + 1

    def lose(self, message: str) -> None:
        """Something the source had that this workbench has no place for."""
        if message not in self.not_carried:
            self.not_carried.append(message)

    def merge(self, other: Notes) -> None:
        for message, n in other._repaired.items():
            self._repaired[message] = self._repaired.get(message, 0) + n
        for message, n in other._dropped.items():
            self._dropped[message] = self._dropped.get(message, 0) + n
        for message in other.not_carried:
            self.lose(message)
        self.warnings += other.warnings

    @property
    def repaired(self) -> list[str]:
        return _counted(self._repaired)

    @property
    def dropped(self) -> list[str]:
        return _counted(self._dropped)


def _counted(tally: dict[str, int]) -> list[str]:
    return [m if n == 1 else f"{m} ({n} times)" for m, n in tally.items()]


@dataclass
class BranchPlan:
    key: int
    parent: int | None
    fork_depth: int
    created_at: datetime


@dataclass
class RecordPlan:
    narrator: str
    report: dict
    usage: dict
    accounting: dict
    window: dict
    timings: dict


@dataclass
class NodePlan:
    key: int
    branch: int
    depth: int
    parent: int | None
    kind: str
    text: str
    raw_text: str
    reasoning: str | None
    live: bool
    edited: bool
    state_after: dict
    created_at: datetime
    record: RecordPlan | None = None


@dataclass
class SavePointPlan:
    name: str
    note: str
    branch: int
    depth: int
    created_at: datetime


@dataclass
class MemoryPlan:
    text: str
    branch: int | None
    depth: int | None
    source_start: int | None
    source_end: int | None
    authority: str
    pinned: bool
    forgotten: bool
    use_count: int
    last_used_at: datetime | None
    created_at: datetime


@dataclass
class SummaryPlan:
    text: str
    branch: int
    depth: int
    source_start: int | None
    source_end: int | None
    trigger: str
    model_name: str
    created_at: datetime


@dataclass
class EventPlan:
    node: int | None
    source: str
    event: Any
    accepted: bool
    reason: str
    note: str
    created_at: datetime


@dataclass
class KnowledgePlan:
    title: str
    original_filename: str
    classification: str
    enabled: bool
    visibility: str
    always_include: bool
    content: str
    media_type: str
    notes: str
    imported_at: datetime
    updated_at: datetime


@dataclass
class CardPlan:
    title: str
    keys: list[str]
    entry: str
    card_type: str
    notes: str
    created_at: datetime
    constant: bool = False  # always in the prompt, keys or not
    enabled: bool = True
    origin: str = ""  # the file and format it came from
    secondary_keys: list[str] = field(default_factory=list)  # narrowing keys (engine.cards.triggers)
    logic: str = "and_any"  # how they combine: one of engine.cards.LOGICS


@dataclass
class ProfilePlan:
    """One entity's visual profile (engine.media.profiles), already checked."""

    entity_key: str
    descriptors: dict
    features: list
    style_notes: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Plan:
    """A whole campaign to create, or (campaign None) cards and knowledge to
    add to an existing one."""

    format: str
    campaign: dict[str, Any] | None
    branches: list[BranchPlan] = field(default_factory=list)  # parents first
    nodes: list[NodePlan] = field(default_factory=list)  # in take order
    head: tuple[int | None, int] = (None, -1)
    save_points: list[SavePointPlan] = field(default_factory=list)
    memories: list[MemoryPlan] = field(default_factory=list)
    summaries: list[SummaryPlan] = field(default_factory=list)
    events: list[EventPlan] = field(default_factory=list)
    knowledge: list[KnowledgePlan] = field(default_factory=list)
    cards: list[CardPlan] = field(default_factory=list)
    notes: Notes = field(default_factory=Notes)
    texts: dict[str, str] = field(default_factory=dict)  # prompt texts the records refer to, by hash
    visual_profiles: list[ProfilePlan] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "branches": len(self.branches), "nodes": len(self.nodes),
            "turn_records": sum(1 for n in self.nodes if n.record is not None),
            "save_points": len(self.save_points), "memories": len(self.memories),
            "summaries": len(self.summaries), "state_events": len(self.events),
            "knowledge_sources": len(self.knowledge), "story_cards": len(self.cards),
            "visual_profiles": len(self.visual_profiles),
        }
