"""Compare: one recorded campaign, replayed across a grid of narrators and
settings, summarised per cell and plotted.

The question it was built for is block trim's: how many prompt tokens does the
server really process per turn, against the tokens that are new that turn
(the last reply, the reader's input and the volatile tail after the history)?
A perfect prefix cache processes only those; sliding the history by one node
re-processes all of it. The figures come from the server (or the embedded
model) through each turn's usage, not from our own estimate.

A server that moves cached chunks (llama-server `--cache-reuse`, and the
embedded narrator since issue 28) also keeps the history a floor step shifts,
so its processed tokens stay near the new content at every fraction; the
targets below are that issue's.
"""
from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import Workbench, WorkbenchError
from engine.providers import Text, Usage

from .replay import Step, move

__all__ = ["GOAL", "MOVES", "PASSAGES", "TARGETS", "TURN_CEILING", "LlamaServer", "Passages", "answer", "answers",
           "grid_cells", "llama_server_binary", "plot", "scripted", "summarise", "targets"]

# Issue 19's goal: processed prompt tokens per turn within 2x the new content's.
GOAL = 2.0
# Issue 28's, for a narrator that moves cached chunks: processed over new
# content (mean per cell) by trim fraction, and no single turn above the ceiling.
TARGETS = {4: 1.5, 2: 1.3}
TURN_CEILING = 4.0

# The shipped campaign's narration: four passages of a narrator turn's length
# (~150 tokens each), cycled, so a 2,048 budget saturates after about ten turns.
PASSAGES = (
    "The lantern throws a short circle of light across the wet planks of the jetty. Below, the water slaps at the "
    "pilings with a slow, patient rhythm, and the rope that ties the skiff creaks each time the swell lifts it. "
    "Across the harbour the customs house is dark except for a single window on the upper floor, where a figure "
    "moves back and forth as if pacing. The smell of brine and pitch is thick in the cold air, and somewhere "
    "behind the net sheds a dog barks twice and then falls silent.",
    "Inside the shed the air is close and smells of old tar. Coils of rope hang from iron hooks along one wall; "
    "against the other stand barrels stencilled with a merchant's crest you half recognise, a heron over three "
    "waves. One barrel has been prised open and its straw packing spills onto the floor. Among the straw lies a "
    "ledger wrapped in oilcloth, its pages swollen with damp, the last entry written in a hurried hand that "
    "breaks off in the middle of a word.",
    "Footsteps sound on the boardwalk outside, measured and unhurried. Through a gap in the planks you see the "
    "glow of a second lantern, held low, sweeping from side to side as its bearer checks each doorway in turn. "
    "A voice calls a name you do not catch, and another answers from further along the quay. The light pauses "
    "at the shed door. For a long moment nothing moves; then the latch lifts a finger's breadth and settles "
    "back, and the steps move on toward the customs house.",
    "The fog thickens until the far side of the harbour is only a suggestion of shapes. A bell on the channel "
    "buoy tolls with the swell, slow and uneven. Down by the slipway an upturned boat has been dragged above the "
    "tide line, and beneath it something pale catches the light: a folded sheet of paper, weighted with a stone. "
    "The ink has run in the damp, but the seal pressed into the wax at its corner is still sharp, the same heron "
    "over three waves.",
)
MOVES = (
    ("act", "walk along the jetty"), ("act", "I look toward the customs house"), ("continue", ""),
    ("act", "go into the net shed"), ("act", "I open the ledger"), ("direct", "Let someone approach the shed."),
    ("act", "hold my breath and keep still"), ("continue", ""), ("act", "slip out after the footsteps fade"),
    ("act", "I head for the slipway"), ("act", "lift the stone and take the paper"),
    ("direct", "The fog should close in further."),
)


class Passages:
    """The shipped campaign's narrator: the passages above, in turn. It is the
    scripted author of the recording, not a stand-in for a model under test."""

    model_id = "shipped-passages"

    def __init__(self, window):
        self.window, self.calls = window, 0

    def context_window(self):
        return self.window

    def execute(self, prompt):
        self.calls += 1
        yield Text(PASSAGES[(self.calls - 1) % len(PASSAGES)])
        yield Usage()


def scripted(db_path: str | Path, turns: int = 24):
    """A recorded campaign of `turns` turns to replay when the reader has none of their own."""
    from engine.providers.window import LOADED, Window

    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=Passages(Window(32_768, LOADED, detail="scripted recording", reachable=True)),
                 embedder="none", memory_enabled=False, auto_summarize=False)
    camp = wb.new_campaign("The Heron Seal", premise="A smuggling port on a foggy night; a merchant house hides "
                           "its cargo from the customs men.", protagonist="Tamsin",
                           opening="The last ferry has gone and the quay is empty.")
    for i in tqdm(range(turns), desc="recording", leave=False):
        mode, text = MOVES[i % len(MOVES)]
        move(camp, Step(mode, text, ""))()
    return camp


def _spec(name: str, path: str, seed: int):
    """"local" -> the embedded model (seeded), "local-prefix" -> the same with
    prefix-only caching (no chunk reuse), "endpoint" or "llama-server" -> a
    server, else "module:Class"."""
    from .replay import Factory

    if name in ("local", "local-prefix"):
        return Factory("engine.providers.embedded:LocalNarrator", {"seed": seed, "cache_reuse": name == "local"})
    if name in ("endpoint", "llama-server"):
        return "endpoint"
    return Factory(name, path=str(Path(path).resolve()) if path else None)


def grid_cells(narrators: dict[str, str], axes: dict[str, list], *, endpoint_url: str = "", model: str = "",
               path: str = "", seed: int = 7, servers: dict[str, str] | None = None,
               narrator_axes: dict[str, dict] | None = None, **settings) -> list[dict]:
    """The notebook's grid: every narrator (label -> "local", "local-prefix",
    "endpoint", "llama-server" or "module:Class") across every combination of
    `axes` (or of `narrator_axes[label]` over them), with `settings` in each
    cell. A "llama-server" narrator talks to `servers[label]`, the URL of the
    server started for it."""
    from .grid import cells

    out = []
    for label, name in narrators.items():
        url = (servers or {}).get(label, "") if name == "llama-server" else endpoint_url
        extra = {"endpoint_url": url, "model": model} if name in ("endpoint", "llama-server") else {}
        own = {**axes, **(narrator_axes or {}).get(label, {})}
        out += [{**settings, **extra, **cell} for cell in cells({label: _spec(name, path, seed)}, **own)]
    return out


# ------------------------------------------------------------ a llama-server to compare with
def llama_server_binary(choice: str = "auto") -> str | None:
    """The llama-server to run: `choice` itself, or for "auto" STORY_LLAMA_SERVER,
    then `llama-server` on the PATH, then scripts/build-llama-server.sh's default
    place; None when there is none (the notebook then says so and leaves it out)."""
    if choice and choice != "auto":
        return choice if Path(choice).is_file() else None
    for candidate in (os.environ.get("STORY_LLAMA_SERVER"), shutil.which("llama-server"),
                      "/work/llama-server/llama-server"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


class LlamaServer:
    """llama.cpp's server on a free loopback port, serving `model` (default:
    the bundled GGUF) with `args`, until `stop()` (or the end of a `with`)."""

    def __init__(self, binary: str, args: str = "--cache-reuse 64 -c 4096 -np 1", model: str | Path | None = None,
                 threads: int | None = None, timeout: float = 180.0):
        from engine.providers.embedded import model_path
        from engine.providers.worker import default_threads

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # One thread per idle core, as the embedded worker takes, so the two are compared alike.
        self.model = Path(model or model_path())
        self.model_name = self.model.name  # the name the server answers to
        self.args = [binary, "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                     "-t", str(threads or default_threads()), *shlex.split(args)]
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{port}/v1"
        self._wait(port, timeout)

    def _wait(self, port: int, timeout: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise WorkbenchError(f"llama-server did not answer on port {port} within {timeout:.0f} s: {' '.join(self.args)}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def answers(table: pd.DataFrame, grid: list[dict], fraction: int = 4) -> pd.DataFrame:
    """`answer` for every group of cells that differ only in trim_fraction and
    hold both 0 (slide by one) and `fraction`."""
    groups: dict[str, dict[int, str]] = {}
    for cell in grid:
        if "trim_fraction" in cell:
            key = cell["label"].replace(f"trim_fraction={cell['trim_fraction']}", "trim_fraction=*")
            groups.setdefault(key, {})[cell["trim_fraction"]] = cell["label"]
    rows = [{"group": key, **answer(table, slide=by[0], trimmed=by[fraction])}
            for key, by in groups.items() if 0 in by and fraction in by and by[0] in table.index
            and by[fraction] in table.index]
    return pd.DataFrame(rows)


def _steps(floors: pd.Series) -> int:
    values = pd.to_numeric(floors, errors="coerce").dropna()
    return int((values.diff().fillna(0) != 0).sum())


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    """Narrated turns (not copied from the recording), after each cell's first,
    which is cold for every cell; turns the engine refused have no figures."""
    narrated = df[(~df["recorded"].astype(bool)) & df["node_id"].notna()]
    first = narrated.groupby("cell")["turn"].transform("min")
    return narrated[narrated["turn"] > first]


def _p95(values: pd.Series) -> float:
    return values.quantile(0.95)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: prompt tokens, what the server processed and served
    from cache, new content, their ratio (mean and worst turn), times (mean,
    median and 95th percentile), reply length, leaks and refusals."""
    m = _measured(df).copy()
    for column in ("prompt_tokens", "processed_tokens", "cached_tokens", "new_tokens", "new_server_tokens",
                   "prompt_ms", "total_ms", "ttft_ms", "words", "leaks"):
        m[column] = pd.to_numeric(m[column], errors="coerce")
    m["turn_over_new"] = m["processed_tokens"] / m["new_server_tokens"]
    g = m.groupby("cell", sort=False)
    table = g.agg(turns=("turn", "count"), prompt_tokens=("prompt_tokens", "mean"),
                  processed_tokens=("processed_tokens", "mean"), new_tokens=("new_tokens", "mean"),
                  new_server_tokens=("new_server_tokens", "mean"),
                  prompt_ms=("prompt_ms", "mean"), ttft_ms=("ttft_ms", "mean"), total_ms=("total_ms", "mean"),
                  reply_words=("words", "mean"), leaks=("leaks", "sum"), floor_steps=("floor_depth", _steps))
    table["cached_share"] = g["cached_tokens"].sum(min_count=1) / g["prompt_tokens"].sum(min_count=1)
    # Like for like: both in the server's tokens (new content is counted in ours).
    table["processed_over_new"] = table["processed_tokens"] / table["new_server_tokens"]
    table["worst_turn_over_new"] = g["turn_over_new"].max()
    # What the embedded narrator read over the previous reply and the input alone (no sections): the
    # reply as stored ("reply_input") and as generated, its completion tokens ("generated_input").
    for basis in ("reply_input", "generated_input"):
        column = f"{basis}_server_tokens"
        if column not in m:
            continue
        m[column] = pd.to_numeric(m[column], errors="coerce")
        turn = m["processed_tokens"] / m[column].where(m[column] > 0)
        table[f"processed_over_{basis}"] = g["processed_tokens"].sum() / m.groupby("cell", sort=False)[column].sum(
            min_count=1)
        table[f"turn_over_{basis}_median"] = turn.groupby(m["cell"], sort=False).median()
    table["turns_over_ceiling"] = g["turn_over_new"].apply(lambda s: int((s > TURN_CEILING).sum()))
    for column in ("ttft_ms", "total_ms"):
        table[f"{column}_median"] = g[column].median()
        table[f"{column}_p95"] = g[column].apply(_p95)
    table["fits_share"] = g["accounting"].apply(lambda s: float((s == "fits").mean()))
    table["refused_turns"] = df[df["node_id"].isna()].groupby("cell").size().reindex(table.index).fillna(0).astype(int)
    return table


def answer(table: pd.DataFrame, *, slide: str, trimmed: str) -> dict:
    """The block-trim question in numbers: sliding by one against block trim,
    and the best cell against the goal (processed within GOAL x the new content)."""
    off, on = table.loc[slide], table.loc[trimmed]
    known = table["processed_over_new"].dropna()
    best = known.idxmin() if len(known) else None
    return {
        "processed_ratio": _ratio(off["processed_tokens"], on["processed_tokens"]),
        "prompt_ms_ratio": _ratio(off["prompt_ms"], on["prompt_ms"]),
        "turn_ratio": _ratio(off["total_ms"], on["total_ms"]),
        "cached_share_slide": _num(off["cached_share"]), "cached_share_trim": _num(on["cached_share"]),
        "processed_over_new_trim": _num(on["processed_over_new"]),
        "best_cell": best, "best_processed_over_new": _num(known.min()) if best is not None else None,
        "goal": GOAL, "goal_met": bool(best is not None and known.min() <= GOAL),
    }


def targets(table: pd.DataFrame, grid: list[dict]) -> pd.DataFrame:
    """Issue 28's targets, per cell whose trim fraction has one: processed over
    new content within TARGETS[fraction] and no turn above TURN_CEILING."""
    rows = []
    for cell in grid:
        goal = TARGETS.get(cell.get("trim_fraction"))
        if goal is None or cell["label"] not in table.index:
            continue
        row = table.loc[cell["label"]]
        ratio, worst = _num(row["processed_over_new"]), _num(row["worst_turn_over_new"])
        rows.append({"cell": cell["label"], "trim_fraction": cell["trim_fraction"], "processed_over_new": ratio,
                     "target": goal, "worst_turn": worst, "ceiling": TURN_CEILING,
                     "met": bool(ratio is not None and worst is not None and ratio <= goal and worst <= TURN_CEILING)})
    return pd.DataFrame(rows)


def _num(value) -> float | None:
    return None if pd.isna(value) else round(float(value), 3)


def _ratio(a, b) -> float | None:
    return None if pd.isna(a) or pd.isna(b) or not b else round(float(a) / float(b), 3)


def _short(labels) -> dict[str, str]:
    """Cell labels without the parts every cell shares, so charts stay readable."""
    split = {label: label.split(", ") for label in labels}
    common = set.intersection(*(set(parts) for parts in split.values())) if split else set()
    return {label: ", ".join(p for p in parts if p not in common) or label for label, parts in split.items()}


def plot(df: pd.DataFrame, table: pd.DataFrame):
    """Per turn: tokens the server processed and its prompt time, per cell; per
    cell: processed over new content (the goal line at GOAL) and the cached share."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 7))
    narrated = df[(df["cell"] != "original") & ~df["recorded"].astype(bool)]
    short = _short(list(narrated["cell"].unique()))
    for cell, part in narrated.groupby("cell", sort=False):
        for ax, column in ((axes[0, 0], "processed_tokens"), (axes[0, 1], "prompt_ms")):
            ax.plot(part["turn"], pd.to_numeric(part[column], errors="coerce"), marker="o", ms=3, label=short[cell])
    axes[0, 0].set(title="Prompt tokens the server processed", xlabel="turn", ylabel="tokens")
    axes[0, 1].set(title="Prompt processing time (server's own)", xlabel="turn", ylabel="ms")
    axes[0, 0].legend(fontsize=8)
    shown = table.drop(index="original", errors="ignore").rename(index=short)
    shown["processed_over_new"].plot.barh(ax=axes[1, 0], color="#4c72b0", label="processed / new")
    axes[1, 0].axvline(GOAL, color="#c44e52", linestyle="--", label=f"goal: {GOAL:g}x")
    axes[1, 0].set(title="Processed / new content per turn", xlabel="ratio", ylabel="")
    axes[1, 0].legend(fontsize=8)
    shown["cached_share"].plot.barh(ax=axes[1, 1], color="#55a868")
    axes[1, 1].set(title="Share of prompt tokens served from cache", xlabel="share", ylabel="", xlim=(0, 1))
    fig.tight_layout()
    return fig
