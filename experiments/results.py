"""Recording an experiment's named results, twice: inside the executed
notebook (a JSON output with its own MIME type, read back by `read_metrics`)
and in a sidecar JSON file beside it.

About twenty lines instead of scrapbook, whose last release was in 2021 and
which depends on papermill itself.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["MIME", "Results", "read_metrics"]

MIME = "application/vnd.story-workbench.metrics+json"


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
    """`r = Results("block_trim", sidecar="../evidence/block_trim.json"); r.record(ratio=2.9); r.save()`"""

    def __init__(self, experiment: str, sidecar: str | Path | None = None, parameters: dict | None = None):
        self.experiment = experiment
        self.sidecar = Path(sidecar) if sidecar else None
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

    def save(self) -> Path | None:
        if self.sidecar is None:
            return None
        self.sidecar.parent.mkdir(parents=True, exist_ok=True)
        self.sidecar.write_text(json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
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
