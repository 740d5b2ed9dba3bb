"""Strip what changes on every run from an executed notebook, so evidence
diffs show changed results, not changed timestamps and paths."""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["scrub"]

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
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:]:
        scrub(name)
