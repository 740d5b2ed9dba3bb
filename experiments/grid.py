"""A grid of replays on Dask: one task per cell, each writing its own file.

    cells = grid.cells(trim_fraction=[0, 2, 4, 8], context_budget=[2048, 4096])
    df = grid.run(camp, cells, workdir="grid", narrator=Factory("..."))                   # 2-worker LocalCluster
    df = grid.run(camp, cells, workdir="/shared/grid", scheduler="tcp://10.0.0.5:8786")  # a cluster of machines
    df = grid.run(camp, cells, workdir="grid", workers=0)                                # serially, in this process

The recording is read once here and shipped to the workers as plain data, so
no worker ever opens the original file; each cell's workbench file is the
worker's own. Narrators and embedders travel as `Factory` names and are built
on the worker (a model handle cannot be pickled, and each machine should load
its own model or talk to its own server).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from engine import Campaign, WorkbenchError

from .replay import Recording, play, record

__all__ = ["CELL_KEYS", "cells", "run", "run_cell", "timing"]

# Keys of a cell that are not settings: they choose what plays and how it is labelled.
CELL_KEYS = ("narrator", "embedder", "keep_first", "label")


def cells(narrators: dict[str, Any] | None = None, **axes: list) -> list[dict]:
    """Every combination of `axes` (setting name -> values), once per narrator
    (label -> narrator or Factory)."""
    names = list(axes)
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(*axes.values())]
    out = []
    for label, narrator in (narrators or {None: None}).items():
        for combo in combos:
            cell = dict(combo)
            if narrator is not None:
                cell["narrator"] = narrator
            parts = ([label] if label else []) + [f"{k}={v}" for k, v in combo.items()]
            cell["label"] = ", ".join(parts) or "as recorded"
            out.append(cell)
    return out


def _settings(cell: dict) -> dict:
    return {k: v for k, v in cell.items() if k not in CELL_KEYS}


def run_cell(recording: Recording, cell: dict, db_path: str, defaults: dict) -> pd.DataFrame:
    """One cell, wherever it runs: the replay's facts labelled with the cell's settings."""
    options = {**defaults, **cell}
    frame = play(recording, db_path, narrator=options.get("narrator"), embedder=options.get("embedder"),
                 keep_first=options.get("keep_first", 0), progress=False, label=options.get("label", "cell"),
                 **_settings(options))
    frame.insert(0, "cell", cell.get("label") or db_path)
    for key, value in _settings(cell).items():
        frame.insert(1, key, [value] * len(frame))
    frame["db_path"] = db_path
    return frame


def _paths(workdir: Path, n: int) -> list[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    paths = [workdir / f"cell_{i:03d}.db" for i in range(n)]
    for path in paths:  # a grid's files are its own: a rerun replaces them
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    return [str(p) for p in paths]


def _serial(recording, todo, paths, defaults, progress) -> list[pd.DataFrame]:
    return [run_cell(recording, cell, path, defaults)
            for cell, path in tqdm(list(zip(todo, paths, strict=True)), desc="grid", disable=not progress)]


def _client(scheduler: str | None, workers: int):
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler), None
    # Processes, one thread each: a turn holds the GIL while it builds the prompt,
    # and an embedded model wants the cores to itself. Loopback only, no dashboard.
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
    except RuntimeError as exc:  # Dask says only "Nanny failed to start."
        raise WorkbenchError(
            f"Dask could not start {workers} local worker processes ({exc}). Run from a script, the code that "
            "starts the grid must sit under `if __name__ == '__main__':` (each worker process imports the "
            "script again); or pass workers=0 to run the cells here, one after another.") from exc
    return Client(cluster), cluster


def _parallel(recording, todo, paths, defaults, progress, scheduler, workers, client) -> list[pd.DataFrame]:
    from dask.distributed import as_completed

    owned = client is None
    client, cluster = _client(scheduler, workers) if owned else (client, None)
    try:
        shipped = client.scatter(recording, broadcast=True, hash=False)
        futures = [client.submit(run_cell, shipped, cell, path, defaults, pure=False)
                   for cell, path in zip(todo, paths, strict=True)]
        frames = [f.result() for f in tqdm(as_completed(futures), total=len(futures), desc="grid", disable=not progress)]
        return sorted(frames, key=lambda f: paths.index(f["db_path"].iloc[0]))
    finally:
        if owned:
            client.close()
        if cluster is not None:
            cluster.close()


def run(source: Campaign | Recording, grid_cells: list[dict], workdir: str | Path, *, narrator: Any = None,
        embedder: Any = None, keep_first: int = 0, scheduler: str | None = None, workers: int = 2,
        client=None, progress: bool = True) -> pd.DataFrame:
    """Every cell replayed (in parallel on Dask unless `workers=0` and no
    scheduler), the results as one long DataFrame with a `cell` column, the
    original's own turns first as cell "original". With a scheduler address,
    `workdir` must be a folder every worker can write to. An open dask `client`
    is used as it is (and left open), so several grids can share one cluster."""
    if not grid_cells:
        raise WorkbenchError("The grid has no cells: pass e.g. cells(trim_fraction=[0, 4]).")
    recording = source if isinstance(source, Recording) else record(source)
    defaults = {"narrator": narrator, "embedder": embedder, "keep_first": keep_first}
    paths = _paths(Path(workdir), len(grid_cells))
    if client is None and scheduler is None and workers <= 0:
        frames = _serial(recording, grid_cells, paths, defaults, progress)
    else:
        frames = _parallel(recording, grid_cells, paths, defaults, progress, scheduler, workers, client)
    original = recording.original.assign(cell="original", recorded=False)
    return pd.concat([original, *frames], ignore_index=True)


def timing(source: Campaign | Recording, grid_cells: list[dict], workdir: str | Path, *, narrator: Any,
           workers: int = 2) -> dict:
    """Seconds for the same grid serially and on a `workers`-process LocalCluster:
    the first parallel run includes starting the cluster and importing the
    engine in each worker; the second is the same cluster, warm."""
    import time

    from dask.distributed import Client, LocalCluster

    recording = source if isinstance(source, Recording) else record(source)
    out = {"cells": len(grid_cells), "turns": len(recording), "workers": workers}
    started = time.perf_counter()
    run(recording, grid_cells, Path(workdir) / "serial", narrator=narrator, workers=0, progress=False)
    out["serial_s"] = time.perf_counter() - started
    started = time.perf_counter()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        run(recording, grid_cells, Path(workdir) / "cold", narrator=narrator, client=client, progress=False)
        out["parallel_cold_s"] = time.perf_counter() - started
        started = time.perf_counter()
        run(recording, grid_cells, Path(workdir) / "warm", narrator=narrator, client=client, progress=False)
        out["parallel_warm_s"] = time.perf_counter() - started
    out["ratio_cold"] = out["serial_s"] / out["parallel_cold_s"]
    out["ratio_warm"] = out["serial_s"] / out["parallel_warm_s"]
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def _main(argv: list[str] | None = None) -> None:
    """`python -m experiments.grid --narrator narrators:CountingNarrator --path tests`: the timing
    of 8 replays (trim 0/2/4/8 x budget 2,048/4,096) of a 20-turn campaign, serial against 2 workers."""
    import argparse
    import json
    import tempfile

    from engine import Workbench

    from .replay import Factory

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("--narrator", required=True, help="module:Class of an instant narrator")
    parser.add_argument("--path", default=None, help="folder to import it from")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    factory = Factory(args.narrator, path=str(Path(args.path).resolve()) if args.path else None)
    with tempfile.TemporaryDirectory() as tmp:
        wb = Workbench.open(Path(tmp) / "source.db", background=False)
        wb.configure(narrator=factory.build(), embedder="none")
        camp = wb.new_campaign("Timing", premise="A harbour at night.", protagonist="Tamsin", opening="The ferry has gone.")
        for i in range(args.turns):
            camp.act(f"walk to mooring {i}")
        cells_ = cells(trim_fraction=[0, 2, 4, 8], context_budget=[2048, 4096])
        print(json.dumps(timing(camp, cells_, tmp, narrator=factory, workers=args.workers), indent=1))
        wb.close()


if __name__ == "__main__":
    _main()
