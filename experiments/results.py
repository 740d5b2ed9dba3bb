"""Recording an experiment's named results, twice: inside the executed
notebook (a JSON output with its own MIME type, read back by `read_metrics`)
and in a sidecar JSON file.

The sidecar goes to `scratch/<experiment>.json` unless evidence is asked
for: a researcher running a notebook on their own campaign must never
overwrite the recorded evidence. A path inside `evidence/` is honoured only
when `STORY_WORKBENCH_EVIDENCE=1` is set, as `make evidence` does; otherwise
it lands in `scratch/` under the same name, and the notebook says so.

About twenty lines instead of scrapbook, whose last release was in 2021 and
which depends on papermill itself.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["EVIDENCE", "EVIDENCE_SWITCH", "MIME", "SCRATCH", "Results", "read_metrics", "sidecar_path"]

MIME = "application/vnd.story-workbench.metrics+json"
ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "evidence"
SCRATCH = ROOT / "scratch"
EVIDENCE_SWITCH = "STORY_WORKBENCH_EVIDENCE"


def sidecar_path(experiment: str, sidecar: str | Path | None = None) -> Path:
    """Where this run's sidecar is written: `sidecar`, unless that is inside
    evidence/ and evidence was not asked for; `scratch/<experiment>.json` by default."""
    if not sidecar:
        return SCRATCH / f"{experiment}.json"
    path = Path(sidecar)
    if _inside(path, EVIDENCE) and os.environ.get(EVIDENCE_SWITCH) != "1":
        return SCRATCH / path.name
    return path


def _inside(path: Path, folder: Path) -> bool:
    return folder.resolve() in path.resolve().parents


def _shown(path: Path) -> str:
    """Relative to the project when inside it: executed evidence names no machine's folders."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if _inside(full, ROOT) else str(path)


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN to None."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Results:
    """`r = Results("block_trim"); r.record(ratio=2.9); r.save()` writes scratch/block_trim.json."""

    def __init__(self, experiment: str, sidecar: str | Path | None = None, parameters: dict | None = None):
        self.experiment = experiment
        self.asked = Path(sidecar) if sidecar else None
        self.sidecar = sidecar_path(experiment, sidecar)
        self.metrics: dict[str, Any] = {}
        self.parameters = _plain(parameters or {})

    def record(self, **metrics: Any) -> None:
        self.metrics.update({k: _plain(v) for k, v in metrics.items()})
        self._display({k: self.metrics[k] for k in metrics})

    def _display(self, payload: dict) -> None:
        try:
            from IPython.display import display
        except ImportError:  # outside IPython: the sidecar still gets everything
            return
        text = "\n".join(f"{k} = {v}" for k, v in payload.items())
        display({MIME: {"experiment": self.experiment, "metrics": payload}, "text/plain": text}, raw=True)

    def as_dict(self) -> dict:
        return {"experiment": self.experiment, "parameters": self.parameters, "metrics": self.metrics}

    def save(self) -> Path:
        """Write the sidecar, and say where (and why there, if not where asked)."""
        self.sidecar.parent.mkdir(parents=True, exist_ok=True)
        self.sidecar.write_text(json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        moved = self.asked is not None and self.asked.resolve() != self.sidecar.resolve()
        why = (f" (not {self.asked}: evidence/ is written only with {EVIDENCE_SWITCH}=1, as make evidence sets)"
               if moved else "")
        print(f"Results written to {_shown(self.sidecar)}{why}.")
        return self.sidecar


def read_metrics(notebook: str | Path) -> dict[str, Any]:
    """Every metric an executed notebook recorded, later values winning."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    metrics: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(MIME)
            if payload:
                metrics.update(payload["metrics"])
    return metrics
