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
