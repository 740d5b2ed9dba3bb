"""Keep the tracked notebooks clean while they are played.

`make lab` opens `notebooks/play.ipynb` itself, and JupyterLab autosaves
what it shows: outputs, widget state, execution counts. This
pre-save hook (`scripts/play.py` installs it in the server it starts) saves
any notebook under the project's `notebooks/` folder as its sources only,
written exactly as nbformat writes it, so playing leaves `git diff` empty
while an edit to a cell's code is still saved like any other edit.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["NOTEBOOKS", "is_tracked_notebook", "keep_sources_only", "sources_only"]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# Notebook metadata the sources keep; everything else a session adds (widget
# state) changes run to run.
# language_info is kept whole: JupyterLab rewrites a shorter one with what the
# kernel reports as it starts, which marked the play notebook unsaved on every
# open; so git's copy carries what this machine's kernel reports.
_KEPT_METADATA = ("kernelspec", "language_info")
_VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "papermill", "trusted")


def is_tracked_notebook(path: str | Path, root: str | Path = "") -> bool:
    """Whether `path` (relative to the server's `root`, or absolute) lies in notebooks/."""
    full = (Path(root) / path).resolve()
    return full.suffix == ".ipynb" and NOTEBOOKS in full.parents


def sources_only(notebook: dict) -> dict:
    """The notebook with no outputs, counts or session metadata (changed in place and returned)."""
    metadata = notebook.get("metadata", {})
    for key in list(metadata):
        if key not in _KEPT_METADATA:
            del metadata[key]
    for cell in notebook.get("cells", []):
        for key in _VOLATILE_CELL_METADATA:
            cell.get("metadata", {}).pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return notebook


def keep_sources_only(model: dict, path: str, contents_manager=None, **_) -> None:
    """jupyter_server's `FileContentsManager.pre_save_hook` signature.

    The notebook-level metadata on disk wins over the session's: JupyterLab
    rewrites the kernelspec's display name to the running kernel's, which
    would otherwise show as a change in every notebook opened."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    root = getattr(contents_manager, "root_dir", "") or ""
    if not is_tracked_notebook(path, root):
        return
    notebook = sources_only(model["content"])
    on_disk = Path(root) / path
    try:
        notebook["metadata"] = json.loads(on_disk.read_text(encoding="utf-8"))["metadata"]
    except (OSError, ValueError, KeyError):
        pass  # a new notebook: the stripped session metadata is all there is
