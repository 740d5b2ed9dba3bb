from sqlalchemy import func, select, text

from engine.store import BranchRow, NodeRow, SavePointRow, TurnRecordRow

TABLES = ("campaigns", "branches", "nodes", "turn_records", "save_points", "settings")


def census(wb) -> dict[str, int]:
    """Row count of every table: the 'nothing was written' check."""
    with wb.db.reading() as s:
        return {t: s.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in TABLES}


def texts(camp) -> list[str]:
    return [e.text for e in camp.history()]


def all_node_ids(wb) -> set[int]:
    with wb.db.reading() as s:
        return set(s.scalars(select(NodeRow.id)))


def set_states(wb) -> None:
    """Give every node a distinct state snapshot so head moves can be checked."""
    with wb.db.writing() as s:
        for node in s.scalars(select(NodeRow)):
            node.state_after = {"scene": {"summary": f"after node {node.id}"}}


def head_state_matches(camp) -> bool:
    history = camp.history()
    expected = {"scene": {"summary": f"after node {history[-1].id}"}} if history else {}
    return camp.state == expected


__all__ = [
    "BranchRow",
    "NodeRow",
    "SavePointRow",
    "TurnRecordRow",
    "all_node_ids",
    "census",
    "func",
    "head_state_matches",
    "set_states",
    "texts",
]


def memory_bank(path):
    """A workbench file with one played turn and nothing derived (memories are
    added by hand, with vectors the test chooses): (workbench, campaign)."""
    from narrators import ScriptedNarrator

    from engine import Workbench

    wb = Workbench.open(path, background=False)
    wb.configure(narrator=ScriptedNarrator(["On."]), embedder="none", memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("Bank", opening="Start.")
    camp.act("walk")
    return wb, camp


def add_memories(db, camp, memories, model: str, pinned: int = 0) -> list[int]:
    """Stores (text, vector) memories at the campaign's head under embedding
    `model`, the first `pinned` of them pinned; their ids, in order."""
    import numpy as np

    from engine.memory.vectors import pack
    from engine.store.memory_tables import MemoryRow

    with db.writing() as s:
        branch, depth = camp.head
        rows = [MemoryRow(campaign_id=camp.id, text=text, branch_id=branch, depth=depth, source_start=depth,
                          source_end=depth, vector=pack(np.asarray(vector, dtype=np.float32)), vector_model=model,
                          pinned=n < pinned)
                for n, (text, vector) in enumerate(memories)]
        s.add_all(rows)
        s.flush()
        return [row.id for row in rows]
