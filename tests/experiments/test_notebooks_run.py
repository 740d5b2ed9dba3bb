"""Each research notebook runs headless under papermill with small parameters,
and what it recorded is asserted within tolerances."""
from pathlib import Path

import papermill as pm
import pytest

from experiments.results import read_metrics

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
pytestmark = pytest.mark.realmodel


def run(name, tmp_path, **parameters):
    out = tmp_path / f"{name}.ipynb"
    parameters = {"workdir": str(tmp_path), "sidecar": str(tmp_path / f"{name}.json"), **parameters}
    pm.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=parameters, kernel_name="python3",
                        cwd=str(NOTEBOOKS), progress_bar=False)
    assert (tmp_path / f"{name}.json").exists()
    return read_metrics(out)


def test_block_trim_reuses_more_of_the_prompt_than_sliding(tmp_path):
    m = run("block_trim", tmp_path, budget=1536, max_output=48, seed_turns=10, turns=4, fractions=[0, 4])
    assert m["reused_share_on"] > m["reused_share_off"]
    assert m["evaluated_ratio"] > 1.0


def test_token_accounting_on_a_generated_campaign(tmp_path):
    m = run("token_accounting", tmp_path, turns=3, budget=2048, max_output=48)
    assert m["turns"] == 3
    assert set(m["verdicts"]) <= {"fits", "unknown", "truncation_suspected", "exceeded"}
    assert m["max_estimate_share_of_budget"] <= 1.0


def test_leak_count_is_zero_on_what_was_stored(tmp_path):
    m = run("leak_count", tmp_path, turns=3, max_output=64)
    assert m["ai"] == 3 and m["leaking"] == 0


def test_calibration_separates_minilm_and_writes_the_registry_entry(tmp_path):
    import json

    registry = tmp_path / "calibration.json"
    m = run("calibrate", tmp_path, backend="minilm", write_registry=True, registry=str(registry))
    assert m["separated"] and 0.2 < m["floor"] < 0.4 and m["registered"]
    assert m["targeted"]["n"] == 13 and m["off_topic"]["n"] == 100
    written = json.loads(registry.read_text())["models"]["sentence-transformers/all-minilm-l6-v2"]
    assert written["floor"] == m["floor"] and written["targeted"]["min"] > written["off_topic"]["max"]


def test_calibration_of_the_gguf_model_reports_an_overlap_honestly(tmp_path):
    m = run("calibrate", tmp_path, backend="gguf")
    assert m["model_id"].startswith("gguf:")
    assert m["separated"] is (m["floor"] is not None)


def test_release_evidence_runs_and_recovers(tmp_path):
    m = run("release_evidence", tmp_path, turns=14, budget=1536, max_output=48)
    v = m["verdicts"]
    assert v["M03 every prompt within budget"] and v["leak count 0"] and v["process restarts"]
    assert v["recovery into a fresh database"], m["details"]["recovery into a fresh database"]
    assert m["checks"] == 6
