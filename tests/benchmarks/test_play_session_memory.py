"""Peak resident memory of a play session with the defaults (goal: 2.5 GB),
measured in a process of its own so nothing of the test runner counts.

Reproduce: `.venv/bin/python -m pytest tests/benchmarks/test_play_session_memory.py --benchmark-only`
(the whole OpenLore wiki as the library, its relevance-model vectors computed,
twelve turns), or run `tests/benchmarks/play_session.py` directly.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.realmodel
SCRIPT = Path(__file__).with_name("play_session.py")
GOAL_MB = 2500


def test_peak_memory_of_a_play_session_with_the_defaults(benchmark, tmp_path):
    # make test: a slice of the wiki and two turns (the same models load, so
    # the same peak in the main); make bench: all of it and twelve turns
    turns, chars = (12, 0) if benchmark.enabled else (2, 6000)

    def run():
        done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "play.db"), str(turns), str(chars)],
                              capture_output=True, text=True, timeout=3600)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    out = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(out, goal_mb=GOAL_MB)
    assert out["turns"] + out["refused"] == turns and out["turns"] >= 1
    assert out["passages"] > 0 and (out["second_stage"]["model"] == "" or out["second_stage"]["embedded"] > 0)
    assert out["peak_mb"] <= GOAL_MB, f"a play session peaked at {out['peak_mb']:,.0f} MB"
