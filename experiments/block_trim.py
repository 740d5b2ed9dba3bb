"""Does trimming history in blocks keep the server's prompt cache warm?

Plays the same scripted campaign once per TRIM_FRACTION value (0 = no block
trim: the window slides by one node every turn) through the embedded
llama.cpp narrator, whose KV cache reuses the longest common prefix, and
records per turn the prompt size, the tokens reused from cache and the
prompt-processing time. The reference measured 124.0 s against 362.4 s per
turn (2.9x) on an 8,192 budget with a 3B model; this measures the same shape
on whatever model it is given.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import Workbench
from engine.providers import Text, Usage

from .prefill import PrefillTimer

__all__ = ["SEED_PASSAGE", "PLAYER_LINES", "Seeder", "play", "compare", "summarise", "speedup", "plot"]

# A passage about as long as a narrator turn at a ~200-token cap.
SEED_PASSAGE = (
    "Fog rolls in off the estuary and settles between the warehouses. Somewhere a chain clanks against a "
    "bollard, and the gulls, for once, are quiet. The lamplighter has not come this far along the quay; the "
    "only light is the lantern you carry and the faint green glow of the harbour buoy, blinking its patient "
    "count. Crates stamped with the Vell family mark are stacked three high, their ropes still wet. A door "
    "stands ajar at the end of the row, and from it comes the smell of tar and cold smoke."
)
PLAYER_LINES = ["walk along the quay", "I check the crates", "listen at the door", "look back at the buoy",
                "go inside", "I follow the smell of smoke", "search the shelves", "wait in the dark"]


class Seeder:
    """Writes the first turns from a fixed passage, so every run starts from the
    same saturated window without spending minutes generating it."""

    model_id = "seed-passage"

    def __init__(self, window):
        self.window = window

    def context_window(self):
        return self.window

    def execute(self, prompt):
        yield Text(SEED_PASSAGE)
        yield Usage(None, None)


def play(fraction: int, *, narrator, db_path: Path, budget: int, max_output: int, seed_turns: int,
         turns: int, progress: bool = True) -> pd.DataFrame:
    wb = Workbench.open(db_path, background=False)
    wb.configure(narrator=Seeder(narrator.context_window()), embedder="none", memory_enabled=False,
                 auto_summarize=False, context_budget=budget, max_output_tokens=max_output, trim_fraction=fraction,
                 temperature=0.7)
    camp = wb.new_campaign(f"Quay (fraction {fraction})", premise="A smuggling port at night.",
                           protagonist="Tamsin", opening="The last ferry has gone.")
    for i in range(seed_turns):
        camp.act(PLAYER_LINES[i % len(PLAYER_LINES)])
    timer = PrefillTimer(narrator)
    wb.configure(narrator=timer)
    rows = []
    for i in tqdm(range(turns), desc=f"fraction {fraction}", disable=not progress):
        turn = camp.act(PLAYER_LINES[(seed_turns + i) % len(PLAYER_LINES)])
        m = timer.measurements[-1]
        rows.append({"fraction": fraction, "turn": i + 1, "prompt_tokens": m.prompt_tokens,
                     "reused_tokens": m.reused_tokens, "evaluated_tokens": m.prompt_tokens - m.reused_tokens,
                     "prefill_s": m.prefill_s, "turn_s": m.total_s,
                     "floor_depth": turn.report.history.floor_depth,
                     "history_included": turn.report.history.included})
    wb.close()
    return pd.DataFrame(rows)


def compare(fractions, *, narrator, workdir: Path, **kw) -> pd.DataFrame:
    frames = []
    for fraction in fractions:
        path = Path(workdir) / f"block_trim_{fraction}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        frames.append(play(fraction, narrator=narrator, db_path=path, **kw))
    return pd.concat(frames, ignore_index=True)


def _steps(floors: pd.Series) -> int:
    values = pd.to_numeric(floors, errors="coerce").dropna()
    return int((values.diff().fillna(0) != 0).sum())


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per fraction, over the measured turns after the first (which is cold for every run)."""
    df = df[df["turn"] > 1]
    table = df.groupby("fraction").agg(
        turns=("turn", "count"), prompt_tokens=("prompt_tokens", "mean"), reused_share=("reused_tokens", "sum"),
        evaluated_tokens=("evaluated_tokens", "mean"), prefill_s=("prefill_s", "mean"), turn_s=("turn_s", "mean"),
        floor_steps=("floor_depth", _steps))
    table["reused_share"] = table["reused_share"] / df.groupby("fraction")["prompt_tokens"].sum()
    return table


def speedup(df: pd.DataFrame, fraction: int = 4) -> dict:
    """Slide-by-one over block trim: prompt processing and whole-turn time ratios."""
    table = summarise(df)
    off, on = table.loc[0], table.loc[fraction]
    return {"prefill_ratio": float(off["prefill_s"] / on["prefill_s"]),
            "turn_ratio": float(off["turn_s"] / on["turn_s"]),
            "evaluated_ratio": float(off["evaluated_tokens"] / on["evaluated_tokens"]),
            "reused_share_off": float(off["reused_share"]), "reused_share_on": float(on["reused_share"])}


def plot(df: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for fraction, part in df.groupby("fraction"):
        label = "slide by one (off)" if fraction == 0 else f"TRIM_FRACTION {fraction}"
        axes[0].plot(part["turn"], part["prefill_s"], marker="o", ms=3, label=label)
        axes[1].plot(part["turn"], part["evaluated_tokens"], marker="o", ms=3, label=label)
    axes[0].set(title="Prompt processing per turn", xlabel="turn", ylabel="seconds")
    axes[1].set(title="Prompt tokens evaluated (not reused from cache)", xlabel="turn", ylabel="tokens")
    axes[0].legend()
    fig.tight_layout()
    return fig
