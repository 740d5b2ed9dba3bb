"""A long, varied campaign played through the public facade only, so the same
script can run against an older release (to make a file for the migration
test) and against this one (for the reconstruction test)."""
from __future__ import annotations

KNOWLEDGE = """# Westhaven

## The chapel
The chapel bells were cast from the wreck of the Morning Star; they ring
only when a ship is lost.

## The harbour
Mara keeps the harbour ledger. The tide turns at the sixth bell.
"""


def play(camp, turns: int, *, with_knowledge: bool = True) -> None:
    """`turns` narrations with acts, continues, directions, retries, edits,
    take switches, an undo-and-fork every 40 turns and corrections."""
    if with_knowledge:
        camp.knowledge.add("westhaven.md", KNOWLEDGE, classification="canon")
    for i in range(turns):
        step = i % 10
        if step == 3:
            camp.retry()
        elif step == 5:
            camp.continue_story()
        elif step == 7:
            camp.direct(f"Let the fog thicken, beat {i}.")
        elif step == 8 and camp.history()[-1].kind == "narrator":
            camp.edit(camp.history()[-1].id, f"Mara hides the ledger under the bell rope ({i}).")
        else:
            camp.act(f"I ask Mara about the bells, question {i}")
        if i % 40 == 39:
            camp.undo()
            camp.undo()
            camp.act(f"Instead I walk to the lighthouse, attempt {i}")
        if i % 25 == 12 and len(camp.takes()) > 1:
            camp.select_take(1)
        if i % 50 == 20:
            camp.correct({"type": "add_fact", "predicate": f"the bells are silent ({i})"}, note="reader")
