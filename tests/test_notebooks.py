"""The notebooks run headless under papermill, and their sources carry no outputs."""
import json
from pathlib import Path

import papermill as pm
import pytest

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_sources_have_no_outputs_and_a_parameters_cell(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in code)


@pytest.mark.realmodel
def test_play_notebook_plays_scripted_turns_with_the_embedded_narrator(tmp_path):
    transcript = tmp_path / "story.txt"
    pm.execute_notebook(
        str(NOTEBOOKS / "play.ipynb"),
        str(tmp_path / "play.ipynb"),
        parameters={
            "db_path": str(tmp_path / "play.db"),
            "fresh": True,
            "inputs": ["knock on the door", "I wait"],
            "headless": True,
            "max_output_tokens": 32,
            "transcript_path": str(transcript),
        },
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    story = transcript.read_text().split("\n\n")
    assert story[1] == "> You knock on the door." and "> I wait." in story
    assert len(story) >= 5  # opening, two inputs, two narrations
    executed = json.loads((tmp_path / "play.ipynb").read_text())
    app_cell = next(c for c in executed["cells"] if c["cell_type"] == "code" and "CampaignApp(camp)" in "".join(c["source"]))
    bundle = next(o["data"] for o in app_cell["outputs"] if "data" in o)
    # the live app where widgets render, and a static transcript where they do not
    assert "application/vnd.jupyter.widget-view+json" in bundle and "story-workbench-campaign" in "".join(bundle["text/html"])
    assert "You knock on the door." in "".join(bundle["text/html"])  # the app cell shows the story played
    errors = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not [o for o in errors if "Traceback" in "".join(o.get("text", ""))]


@pytest.mark.realmodel
def test_recall_eval_notebook_runs_with_small_parameters(tmp_path):
    """One short campaign, its memories and summaries written by the embedded model."""
    from experiments.results import read_metrics

    out, sidecar = tmp_path / "recall_eval.ipynb", tmp_path / "recall_eval.json"
    pm.execute_notebook(str(NOTEBOOKS / "recall_eval.ipynb"), str(out), kernel_name="python3", cwd=str(NOTEBOOKS),
                        progress_bar=False,
                        parameters={"turns": 20, "campaigns": 1, "windows": [2048], "tune_grid": False,
                                    "workdir": str(tmp_path / "work"), "sidecar": str(sidecar)})
    m = read_metrics(out)
    assert m["facts"] == 14 and json.loads(sidecar.read_text())["metrics"]["facts"] == 14
    assert set(m["held_out"]) == {"raw/single/2048", "raw/parts/2048", "guarded/single/2048", "guarded/parts/2048"}
    assert all(0 <= v <= 1 for v in m["held_out"].values()) and m["memories_written"] >= 2
    assert m["targets"]["2048"]["target"] is None  # targets are set for 4,096 and 16,384 only
    judged = {(r["judged"], r["half"]) for r in m["memory_judge"]}  # the real second stage as the memory judge
    assert judged == {(n, h) for n in (0, 5, 10, 20) for h in ("tune", "held_out")}


@pytest.mark.realmodel
def test_narration_eval_notebook_runs_with_small_parameters(tmp_path):
    """Three turns of the embedded narrator, each scored before and after the engine's rules."""
    from experiments.results import read_metrics

    out, sidecar = tmp_path / "narration_eval.ipynb", tmp_path / "narration_eval.json"
    pm.execute_notebook(str(NOTEBOOKS / "narration_eval.ipynb"), str(out), kernel_name="python3",
                        cwd=str(NOTEBOOKS), progress_bar=False,
                        parameters={"turns": 3, "max_output_tokens": 48, "memory": False, "ab_seeds": 1,
                                    "ab_tokens": 16, "workdir": str(tmp_path / "work"), "sidecar": str(sidecar)})
    m = read_metrics(out)
    assert m["turns"] == 3 and len(m["turns_table"]) == 3
    # Two of the three turns name something (the lantern, the storm): each is asked again both ways.
    ab = m["opening_ab"]
    assert set(ab) == {"opening", "restated only"} and ab["opening"]["replies"] == ab["restated only"]["replies"] >= 1
    steer = m["steer_ab"]  # and at each steer bias, 0 (none) and the default
    assert set(steer) == {"bias 0", "bias 6"} and steer["bias 0"]["replies"] == ab["opening"]["replies"]
    dry = m["dry_ab"]  # and at each DRY multiplier, 0 (none) and the default, with the copied share
    assert set(dry) == {"dry 0", "dry 0.8"} and dry["dry 0"]["replies"] == ab["opening"]["replies"]
    assert all(0 <= v["copied_4grams"] <= 1 for v in dry.values())
    played = m["turns"] - m["refused"]
    assert played >= 1 and m["ends_after"] == 1.0  # every stored reply ends at a sentence end
    assert set(m["targets"]) == {"second_person_after", "ends_after", "uptake"}
