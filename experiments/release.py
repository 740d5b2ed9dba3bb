"""Release evidence: a long campaign with memory on, process restarts,
retries, undo, a knowledge upload and a planted clue recalled after it left
the window; then recovery of its bundle into a fresh database.

The checks follow the reference's M01-M04 and its recovery contract:
- M01: memory and summary were really active (a bank and a summary exist,
  no derived-work failure);
- M03: every prompt fitted its budget;
- M04: the planted clue, once outside the history window, came back through
  memory or summary (precedence: precondition, then memory/summary, then
  state only, else not recovered);
- leak count 0 over the stored replies;
- recovery: the exported bundle imports in another process into a database
  that never existed, with the same transcript, head, state and counts.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import Workbench
from engine.narrative import count_leaks

from .retrying import until_accepted

__all__ = ["CLUE", "SENTINEL", "schedule", "run", "m04_verdict", "census", "verdicts"]

SENTINEL = "ninth stair"
CLUE = f"I hide the brass key under the {SENTINEL} of the lighthouse"
CANON = ("# The Lighthouse\n\nThe lighthouse on Gull Point has two hundred and twelve stairs. Its keeper, "
         "Oswin Hale, vanished on the night of the equinox storm.\n\n# The Lamp\n\nThe great lamp is lit by "
         "a clockwork that must be wound every dusk; it has not been wound for a week, yet it still turns.\n")
INPUTS = ["walk up the cliff path", "I look at the lamp room", "search the keeper's desk", "listen to the wind",
          "go down to the cellar", "I read the storm log", "follow the wet footprints", "look out to sea",
          '"Oswin? Are you here?"', "check the clockwork", "I climb towards the gallery", "wait for dusk"]
ROOT = Path(__file__).resolve().parent.parent


def schedule(turns: int, plant_at: int = 3) -> list[str]:
    """What each step does: act, plant, retry, undo (then act again), restart, upload."""
    steps = ["act"] * turns
    steps[min(plant_at, turns - 1)] = "plant"
    for fraction, op in ((0.15, "upload"), (0.25, "retry"), (0.4, "restart"), (0.55, "undo"),
                         (0.7, "retry"), (0.8, "restart")):
        i = int(turns * fraction)
        if steps[i] == "act" and i != plant_at:
            steps[i] = op
    return steps


def _configure(wb, narrator, budget, max_output, embedder):
    wb.configure(narrator=narrator, context_budget=budget, max_output_tokens=max_output, embedder=embedder)


_CHILD = """
import sys, json
sys.path.insert(0, {root!r})
from engine import Workbench
from experiments.retrying import until_accepted
wb = Workbench.open({db!r}, background=False)
wb.configure(narrator={narrator!r}, context_budget={budget}, max_output_tokens={max_output}, embedder={embedder!r})
camp = wb.campaign({cid})
for text in {inputs!r}:
    until_accepted(lambda: camp.act(text))
print(json.dumps({{"head": camp.head}}))
"""


def _restart(db, cid, inputs, narrator, budget, max_output, embedder) -> None:
    """Play turns in a brand-new Python process: a genuine restart of the workbench."""
    code = _CHILD.format(root=str(ROOT), db=str(db), narrator=narrator, budget=budget, max_output=max_output,
                         embedder=embedder, cid=cid, inputs=inputs)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the restarted process failed: {done.stderr[-2000:]}")


def _act(camp, text: str):
    return until_accepted(lambda: camp.act(text))


def run(workdir: Path, *, turns: int = 40, narrator: str = "local", budget: int = 2048, max_output: int = 96,
        embedder: str = "local", progress: bool = True) -> dict:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "release.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    wb = Workbench.open(db, background=False)
    _configure(wb, narrator, budget, max_output, embedder)
    camp = wb.new_campaign("Gull Point", premise="A lighthouse whose keeper vanished in a storm.",
                           protagonist="Wren", opening="Rain needles the cliff path below the lighthouse.")
    log, planted_depth = [], None
    for i, step in enumerate(tqdm(schedule(turns), desc="release run", disable=not progress)):
        text = INPUTS[i % len(INPUTS)]
        if step == "plant":
            planted_depth = _act(camp, CLUE).depth - 1
        elif step == "upload":
            camp.knowledge.add("gull_point.md", CANON.encode(), classification="canon")
            _act(camp, text)
        elif step == "retry":
            _act(camp, text)
            until_accepted(camp.retry, required=False)
        elif step == "undo":
            _act(camp, text)
            camp.undo()
            _act(camp, INPUTS[(i + 5) % len(INPUTS)])
        elif step == "restart":
            wb.close()
            _restart(db, camp.id, [text], narrator, budget, max_output, embedder)
            wb = Workbench.open(db, background=False)
            _configure(wb, narrator, budget, max_output, embedder)
            camp = wb.campaign(camp.id)
        else:
            _act(camp, text)
        log.append(step)
    final = camp.context("I think about where I hid the brass key")
    result = {"db": str(db), "campaign_id": camp.id, "steps": log, "planted_depth": planted_depth,
              "records": camp.records(), "final": final, "camp": camp, "wb": wb}
    result["bundle"] = camp.export(workdir / "release_bundle.json")
    return result


def m04_verdict(final: dict, planted_depth: int | None) -> tuple[str, dict]:
    history = next((s["text"] for s in final["sections"] if s["name"] == "history"), "")
    floor = final["history"].get("floor_depth")
    included, total = final["history"]["included"], final["history"]["total"]
    oldest_in_window = total - included
    in_window = None if planted_depth is None else planted_depth >= oldest_in_window
    sections = {s["name"]: s["text"] for s in final["sections"]}
    found = {k: SENTINEL in sections.get(k, "").lower() for k in ("memories", "story_summary", "narrative_state")}
    detail = {"planted_depth": planted_depth, "oldest_depth_in_window": oldest_in_window, "floor_depth": floor,
              "planted_turn_in_history_window": in_window, "in_memories_section": found["memories"],
              "in_summary_section": found["story_summary"], "in_state_section": found["narrative_state"],
              "clue_in_recent_history_window": SENTINEL in history.lower()}
    if in_window:
        return "precondition_not_met", detail
    if in_window is None:
        return "precondition_unknown", detail
    if found["memories"] or found["story_summary"]:
        return "recovered_through_memory_or_summary", detail
    if found["narrative_state"]:
        return "recovered_through_state_only", detail
    return "not_recovered", detail


def census(db: str, campaign_id: int | None = None) -> dict:
    """What must survive recovery, read in a fresh process."""
    code = f"""
import sys, json
sys.path.insert(0, {str(ROOT)!r})
from engine import Workbench
wb = Workbench.open({db!r})
camp = wb.campaign({campaign_id!r}) if {campaign_id!r} else wb.campaigns()[-1]
print(json.dumps({{"transcript": [e.text for e in camp.history()], "head_depth": camp.head[1],
    "can_undo": camp.can_undo, "can_redo": camp.can_redo, "state": camp.state,
    "save_points": sorted(p.name for p in camp.save_points()), "memories": len(camp.memories),
    "summaries": len(camp.summaries()), "events": len(camp.events()), "takes": len(camp.stored_replies()),
    "knowledge": sorted(camp.knowledge.list()["class"].tolist())}}, sort_keys=True, default=str))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def recover(bundle_path: str, workdir: Path) -> tuple[str, int]:
    """Import the bundle in another process into a database that never existed."""
    fresh = Path(workdir) / "recovered" / "fresh.db"
    if fresh.parent.exists():
        for f in fresh.parent.iterdir():
            f.unlink()
    fresh.parent.mkdir(parents=True, exist_ok=True)  # the workbench never creates folders itself
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from engine import Workbench
wb = Workbench.open({str(fresh)!r})
report = wb.import_campaign({str(bundle_path)!r})
print(report.campaign_id)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return str(fresh), int(done.stdout.strip().splitlines()[-1])


def verdicts(result: dict, workdir: Path) -> pd.DataFrame:
    camp, records = result["camp"], result["records"]
    derived = camp.derived()
    failures = derived[derived["status"] == "failed"]
    rows = [
        ("M01 memory and summary active", len(camp.memories) > 0 and bool(camp.summary) and failures.empty,
         f"{len(camp.memories)} memories, summary {'present' if camp.summary else 'absent'}, "
         f"{len(failures)} failing kinds"),
        ("M03 every prompt within budget", bool((records["estimate_tokens"] <= records["budget"]).all()),
         f"largest estimate {int(records['estimate_tokens'].max())} of budget {int(records['budget'].max())}"),
    ]
    verdict, detail = m04_verdict(result["final"], result["planted_depth"])
    rows.append(("M04 planted clue recalled", verdict == "recovered_through_memory_or_summary",
                 f"{verdict}; {json.dumps(detail)}"))
    leaks = count_leaks(camp)
    rows.append(("leak count 0", leaks["leaking"] == 0, f"{leaks['leaking']} of {leaks['ai']} stored replies"))
    restarts = result["steps"].count("restart")
    rows.append(("process restarts", restarts >= 2, f"{restarts} restarts, {result['steps'].count('retry')} retries, "
                 f"{result['steps'].count('undo')} undo"))
    bundle = result["bundle"]
    before = census(result["db"], result["campaign_id"])
    fresh, new_id = recover(bundle.path, workdir)
    after = census(fresh, new_id)
    same = {k: before[k] == after[k] for k in before}
    rows.append(("recovery into a fresh database", all(same.values()),
                 f"{sum(same.values())}/{len(same)} census fields equal"
                 + ("" if all(same.values()) else f"; differ: {[k for k, v in same.items() if not v]}")))
    return pd.DataFrame(rows, columns=["check", "pass", "detail"])
