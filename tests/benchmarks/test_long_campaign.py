"""A turn's engine cost stays flat as a campaign grows.

The default feature set is on, as a user has it: memory, summary, the state
protocol, a knowledge library and recall over every played line, at the
default 16,384-token budget. The narrator and the embedder are made instant,
so what is timed is the engine: one `camp.act` including its derived work
(background=False runs it inline). The bare set (all of that off) is timed
beside it.

Targets: median <= 20 ms at 1,000 turns; at 10,000 turns at most FLAT times
the 1,000-turn median (`test_turn_engine_time_stays_flat`, asserted on an
idle machine); database growth per turn as GROWTH_TARGET says. The
10,000-turn cases run under `make bench` only.
"""
from __future__ import annotations

import os
import sqlite3
import statistics
import time

import pytest
from long_campaign import grow, template_record
from narrators import BagOfWordsEmbedder, ScriptedNarrator

from engine import Workbench

pytestmark = pytest.mark.benchmark
BARE = {"memory_enabled": False, "auto_summarize": False, "embedder": "none", "state_protocol": False}
REPLY = "The lantern gutters, and somewhere below water drips on stone; Mara counts the bells."
BIBLE = """# Westhaven

## The chapel
The chapel bells were cast from the wreck of the Morning Star; they ring only when a ship is lost.

## The harbour
Mara keeps the harbour ledger. The tide turns at the sixth bell, and the lantern on the mole is lit at dusk.
"""
ROUNDS = 30
GROWTH_TURNS = 50
# 6 KB until the memory recall query (issue 30) joined the knowledge query in
# each record (about 200 bytes of recent story per turn, stored once per text)
# and the summary guard began rewriting weak summaries: measured 7,164 bytes
# per turn at 1,000 turns on the defaults (4,096 the turn record, 1,501 prompt
# texts, 682 memories, 546 nodes, 273 summaries, by dbstat over 30 turns).
# Every played line then became a recall unit: its vector is stored once
# (text_vectors) and the memories section, which carries recalled lines, is a
# new prompt text nearly every turn: measured 9,212 bytes per turn over these
# 50 turns at 1,000 (4 December). The bound keeps a regression visible.
GROWTH_TARGET = 10 * 1024
# Flat: the 10,000-turn median over the 1,000-turn one, both timed in one
# process, a turn of each in turn (so other work on the machine weighs on
# both alike). What still differs at 10,000 turns is bounded or small: the
# line scan covers its full 4,000 lines (the search tuning's
# recall_scan_lines) against 2,000, and ~670 summaries are scored against
# ~70. Measured after making the rest incremental: 1.14-1.17 at load 5-6;
# before, 76.8 against 33.1 ms (2.3) at load 0.6-0.8.
FLAT = 1.5
# Asserted only below this one-minute load average (as for the knowledge
# benchmarks): on 2 cores a load of 1 is a core taken by other work.
IDLE_LOAD = 1.0


class Instant(ScriptedNarrator):
    """Generation that costs nothing, so what is timed is the engine; memory
    and summary requests get a short answer like any narrator's."""

    def execute(self, prompt):
        if prompt.task != "narrate":
            from engine.providers import Text

            yield Text("Aldric walked the town and Mara counted the bells.")
            return
        yield from super().execute(prompt)


def _open(path, features: str):
    wb = Workbench.open(path, background=False)
    if features == "bare":
        wb.configure(narrator=Instant([REPLY]), **BARE)
    else:
        wb.configure(narrator=Instant([REPLY]), embedder=BagOfWordsEmbedder(384))
    return wb


def _campaign(tmp_path, turns: int, features: str, records: bool = False):
    """A campaign grown to `turns` with the shape derived work leaves (with
    the defaults, every line's vector too: a long campaign played has them),
    then ten real turns."""
    wb = _open(tmp_path / f"{features}-{turns}.db", features)
    camp = wb.new_campaign("Westhaven", premise="A port town under quarantine.", protagonist="Aldric",
                           opening="The bells have not rung for three days.")
    if features == "defaults":
        camp.knowledge.add("westhaven.md", BIBLE, classification="canon")
    template = template_record(wb.db, camp.act("I begin").id) if records else None
    grow(wb.db, camp.id, turns, BagOfWordsEmbedder(384), template, line_vectors=features == "defaults")
    for i in range(10):  # warm the caches (token counts, vectors) and let derived work catch up
        camp.act(f"I look around, warm-up {i}")
    return wb, camp


def _file_bytes(wb) -> int:
    path = str(wb.db.path)
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


CASES = [(100, "defaults"), (1000, "defaults"), (10_000, "defaults"), (1000, "bare"), (10_000, "bare")]


@pytest.mark.parametrize(("turns", "features"), CASES, ids=[f"{t}-{f}" for t, f in CASES])
def test_turn_engine_time(benchmark, tmp_path, turns, features):
    if turns >= 10_000 and not benchmark.enabled:
        pytest.skip("10,000-turn cases run under `make bench` only (minutes to build on 2 cores)")
    wb, camp = _campaign(tmp_path, turns, features)
    times = []

    def act():
        started = time.perf_counter()
        turn = camp.act("I listen at the chapel door")
        times.append(time.perf_counter() - started)
        return turn

    turn = benchmark.pedantic(act, rounds=ROUNDS if benchmark.enabled else 3, iterations=1)
    assert turn.text == REPLY and turn.report["prompt"]["story"]
    median = statistics.median(times) * 1000
    benchmark.extra_info.update(turns=turns, features=features, median_ms=round(median, 2),
                                p90_ms=round(sorted(times)[int(0.9 * (len(times) - 1))] * 1000, 2))
    if features == "defaults" and benchmark.enabled:
        assert turn.report["memories"]["used"] and turn.report["history"]["included"] > 100
    wb.close()


FLAT_SIZES = (1000, 10_000)


def test_turn_engine_time_stays_flat(benchmark, tmp_path):
    """The defaults' engine time per turn at 10,000 turns over that at 1,000."""
    if not benchmark.enabled:
        pytest.skip("10,000-turn cases run under `make bench` only")
    played = {turns: _campaign(tmp_path, turns, "defaults") for turns in FLAT_SIZES}
    times: dict[int, list[float]] = {turns: [] for turns in FLAT_SIZES}
    load = os.getloadavg()[0]

    def both():
        for turns, (_, camp) in played.items():
            started = time.perf_counter()
            turn = camp.act("I listen at the chapel door")
            times[turns].append(time.perf_counter() - started)
        return turn

    turn = benchmark.pedantic(both, rounds=ROUNDS, iterations=1)
    load = max(load, os.getloadavg()[0])
    medians = {turns: statistics.median(times[turns]) * 1000 for turns in FLAT_SIZES}
    ratio = medians[10_000] / medians[1000]
    benchmark.extra_info.update(median_ms={str(t): round(m, 2) for t, m in medians.items()}, ratio=round(ratio, 3),
                                target_ratio=FLAT, load_average=round(load, 2),
                                target_asserted=load < IDLE_LOAD,
                                lines_scanned=turn.report["memories"].get("lines_scanned"))
    assert turn.report["memories"]["units"]["line"] >= 2 * 10_000
    if load < IDLE_LOAD:
        assert ratio <= FLAT, f"{medians[10_000]:.1f} ms at 10,000 turns, {medians[1000]:.1f} at 1,000 (load {load:.2f})"
    for wb, _ in played.values():
        wb.close()


def test_database_growth_per_turn_at_1000_turns(benchmark, tmp_path):
    """Bytes the file gains per played turn, less the turn's own text (its input and reply)."""
    wb, camp = _campaign(tmp_path, 1000, "defaults")
    before = _file_bytes(wb)
    own = 0
    for i in range(GROWTH_TURNS):
        turn = camp.act(f"I ask Mara about the bells, question {i}")
        own += len(turn.text.encode()) + len((turn.input or "").encode())
    growth = (_file_bytes(wb) - before - own) / GROWTH_TURNS
    benchmark.extra_info.update(bytes_per_turn=round(growth), own_text_per_turn=round(own / GROWTH_TURNS))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert growth <= GROWTH_TARGET, f"{growth:.0f} bytes per turn"
    wb.close()


BUNDLE_CASES = [1000, 10_000]


@pytest.mark.parametrize("turns", BUNDLE_CASES, ids=[str(t) for t in BUNDLE_CASES])
def test_bundle_export_and_import(benchmark, tmp_path, turns):
    """Targets at 1,000 turns: export <= 2 s, import <= 2 s, bundle <= 15 MB; 10,000 is measured."""
    if turns >= 10_000 and not benchmark.enabled:
        pytest.skip("10,000-turn cases run under `make bench` only (minutes to build on 2 cores)")
    wb, camp = _campaign(tmp_path, turns, "defaults", records=True)
    started = time.perf_counter()
    exported = benchmark.pedantic(lambda: camp.export(tmp_path / "long.json"), rounds=1,
                                  iterations=1)
    export_s = time.perf_counter() - started
    fresh = Workbench.open(tmp_path / "fresh.db", background=False)
    fresh.configure(narrator=Instant([REPLY]), embedder=BagOfWordsEmbedder(384))
    started = time.perf_counter()
    imported = fresh.import_campaign(exported.path)
    import_s = time.perf_counter() - started
    benchmark.extra_info.update(turns=turns, export_s=round(export_s, 2), import_s=round(import_s, 2),
                                bundle_mb=round(exported.bytes / 1e6, 2))
    assert exported.importable and imported.dropped == []
    back = fresh.campaign(imported.campaign_id)
    last = back.records().node_id.iloc[-1]
    assert back.turn(int(last)).report["prompt"]["story"]
    if turns == 1000:
        assert export_s <= 2.0 and import_s <= 2.0 and exported.bytes <= 15e6, benchmark.extra_info
    fresh.close()
    wb.close()
