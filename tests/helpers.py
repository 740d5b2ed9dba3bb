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
