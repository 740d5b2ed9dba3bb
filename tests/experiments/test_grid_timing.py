"""`grid.timing` and its command line: the serial-against-Dask figure the
README quotes, run end to end on a real two-process loopback cluster."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_timing_command_replays_the_grid_serially_and_on_two_workers(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments.grid", "--narrator", "narrators:CountingNarrator",
         "--path", str(ROOT / "tests"), "--turns", "4", "--workers", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    assert figures["cells"] == 8 and figures["turns"] == 4 and figures["workers"] == 2
    for key in ("serial_s", "parallel_cold_s", "parallel_warm_s"):
        assert 0 < figures[key] < 300, figures
    assert figures["ratio_warm"] == pytest.approx(figures["serial_s"] / figures["parallel_warm_s"], rel=0.01)


def test_the_timing_command_says_what_it_needs():
    done = subprocess.run([sys.executable, "-m", "experiments.grid"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "--narrator" in done.stderr
