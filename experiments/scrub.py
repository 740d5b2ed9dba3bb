"""Strip what changes on every run from an executed notebook, so evidence
diffs show changed results, not changed timestamps and paths; and drop
progress bars written to stderr, which papermill saves frozen at whatever
they showed when the cell ended ("Loading weights 0%")."""
from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["scrub"]

# A tqdm-style line: a percentage followed by its bar ("12%|██▌ | 3/25"), or a
# line ending on a percentage ("Loading weights 0%"). "5% of pairs" is prose.
_PROGRESS = re.compile(r"\d{1,3}%\||\d{1,3}%\s*$")
_PAPERMILL_VOLATILE = ("start_time", "end_time", "duration", "input_path", "output_path", "environment_variables")


def scrub(notebook: str | Path) -> Path:
    path = Path(notebook)
    nb = json.loads(path.read_text(encoding="utf-8"))
    papermill = nb.get("metadata", {}).get("papermill", {})
    for key in _PAPERMILL_VOLATILE:
        papermill.pop(key, None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        meta.pop("execution", None)
        for key in ("start_time", "end_time", "duration"):
            meta.get("papermill", {}).pop(key, None)
        if "outputs" in cell:
            cell["outputs"] = [o for o in cell["outputs"] if not _progress_only(o)]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _progress_only(output: dict) -> bool:
    """A stderr stream whose every line (as last redrawn after a carriage return) is a progress bar."""
    if output.get("output_type") != "stream" or output.get("name") != "stderr":
        return False
    text = output.get("text", "")
    text = "".join(text) if isinstance(text, list) else text
    shown = [_last_drawn(line) for line in text.split("\n") if line.strip()]
    return bool(shown) and all(_PROGRESS.search(line) for line in shown)


def _last_drawn(line: str) -> str:
    """What a terminal shows of a line redrawn with carriage returns: its last non-blank part."""
    parts = [part for part in line.split("\r") if part.strip()]
    return parts[-1] if parts else ""


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:]:
        scrub(name)
