"""A play session with the defaults, in a process of its own, for its peak
resident memory: `python tests/benchmarks/play_session.py DB TURNS CHARS`.

What a player's process holds: the embedded narrator (SmolLM2), MiniLM, the
relevance model where installed (its query path and the passage pass), a
knowledge library imported and covered by the relevance model's vectors,
memory, summaries and line recall on. The first CHARS characters of the
OpenLore setting wiki are the library (0: all of it). Prints one JSON line.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine import TurnFailed, Workbench  # noqa: E402

LINES = ["walk to the harbour", "I ask the harbourmaster about the missing ship", "look at the charts on the wall",
         '"Who sailed last night?"', "follow the wet footprints", "I open the sea chest", "climb to the lighthouse",
         "I read the logbook by lantern light"]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def main(db: str, turns: int, chars: int) -> dict:
    wb = Workbench.open(db, background=False)
    wb.configure(narrator="local", embedder="local", max_output_tokens=64)
    camp = wb.new_campaign("Harbour", premise="A fishing town whose supply ship vanished.", protagonist="Ada",
                           opening="Fog sits on the harbour and the bell buoy clangs.")
    text = (ROOT / "tests" / "data" / "knowledge" / "openlore.md").read_text(encoding="utf-8")
    camp.knowledge.progress = False
    camp.knowledge.add("openlore.md", text[:chars] if chars else text, classification="canon")
    started = time.perf_counter()
    stage = camp.knowledge.embed_second_stage()
    covered = {"model": stage_model(camp), "embedded": stage.embedded if stage else 0,
               "seconds": round(time.perf_counter() - started, 1)}
    after_library = peak_mb()
    played, refused = 0, 0
    started = time.perf_counter()
    for i in range(turns):
        try:
            camp.act(LINES[i % len(LINES)])
            played += 1
        except TurnFailed:  # a reply of nothing but protocol is refused unwritten; the session goes on
            refused += 1
    return {"peak_mb": round(peak_mb(), 1), "peak_after_library_mb": round(after_library, 1), "turns": played,
            "refused": refused, "seconds_per_turn": round((time.perf_counter() - started) / max(turns, 1), 2),
            "second_stage": covered, "passages": int(camp.knowledge.list().passages.sum())}


def stage_model(camp) -> str:
    stage = camp.knowledge.second_stage
    return getattr(stage, "model_id", "") if stage is not None else ""


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
