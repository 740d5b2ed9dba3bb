"""Playing a tracked notebook never changes git's copy: the server saves
notebooks under notebooks/ as their sources only."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from jupyter_server.services.contents.filemanager import FileContentsManager

from widgets import notebook_files

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the play notebook in a project-shaped folder the hook treats as tracked."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "play.ipynb", tmp_path / "notebooks" / "play.ipynb")
    (tmp_path / "scratch.ipynb").write_text((ROOT / "notebooks" / "play.ipynb").read_text())
    monkeypatch.setattr(notebook_files, "NOTEBOOKS", tmp_path / "notebooks")
    return tmp_path


def _played(model: dict) -> dict:
    """What JupyterLab sends after a session: outputs, counts, widget state, a new kernelspec."""
    nb = model["content"]
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [nbformat.v4.new_output("stream", text=f"turn {i}\n")]
        cell["metadata"]["execution"] = {"iopub.status.idle": "2026-12-01T01:00:00Z"}
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    nb["metadata"]["language_info"] = {"name": "python", "version": "3.11.2", "mimetype": "text/x-python"}
    return model


def test_a_played_tracked_notebook_saves_byte_for_byte_as_before(project):
    before = (project / "notebooks" / "play.ipynb").read_bytes()
    manager = FileContentsManager(root_dir=str(project), pre_save_hook=notebook_files.keep_sources_only)
    manager.save(_played(manager.get("notebooks/play.ipynb")), "notebooks/play.ipynb")
    assert (project / "notebooks" / "play.ipynb").read_bytes() == before


def test_an_edit_to_a_cell_is_still_saved(project):
    manager = FileContentsManager(root_dir=str(project), pre_save_hook=notebook_files.keep_sources_only)
    model = _played(manager.get("notebooks/play.ipynb"))
    model["content"]["cells"][1]["source"] = "inputs = []"
    manager.save(model, "notebooks/play.ipynb")
    saved = nbformat.read(project / "notebooks" / "play.ipynb", as_version=4)
    assert saved.cells[1].source == "inputs = []"
    assert all(not c.get("outputs") for c in saved.cells) and "widgets" not in saved.metadata


def test_a_notebook_outside_notebooks_keeps_its_outputs(project):
    manager = FileContentsManager(root_dir=str(project), pre_save_hook=notebook_files.keep_sources_only)
    manager.save(_played(manager.get("scratch.ipynb")), "scratch.ipynb")
    saved = nbformat.read(project / "scratch.ipynb", as_version=4)
    assert any(c.get("outputs") for c in saved.cells)


def test_the_tracked_notebooks_are_stored_as_sources_only():
    """The hook's promise holds only if git's copies are already in that form."""
    for name in ("play", "token_accounting"):
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        assert nbformat.writes(notebook_files.sources_only(nb)) + "\n" == path.read_text(encoding="utf-8"), name
