"""Where each turn's prompt tokens went, and whether the server read them all.

Reads `camp.records()` (one row per turn with per-section token counts, the
budget, the window, our estimate, the server's count and the verdict) and
draws it: stacked sections against budget and window, the server's count
against the estimate, and the verdicts.
"""
from __future__ import annotations

import pandas as pd

from engine.turns.record import SECTION_COLUMNS

__all__ = ["SECTIONS", "frame", "verdicts", "metrics", "plot"]

SECTIONS = list(SECTION_COLUMNS)


def frame(camp) -> pd.DataFrame:
    df = camp.records()
    df["difference"] = df["prompt_tokens"] - df["estimate_tokens"]
    return df


def verdicts(df: pd.DataFrame) -> pd.Series:
    return df["accounting"].fillna("unknown").value_counts()


def metrics(df: pd.DataFrame) -> dict:
    counted = df.dropna(subset=["prompt_tokens"])
    return {
        "turns": int(len(df)),
        "verdicts": {str(k): int(v) for k, v in verdicts(df).items()},
        "max_estimate_share_of_budget": float((df["estimate_tokens"] / df["budget"]).max()) if len(df) else None,
        "mean_server_minus_estimate": float(counted["difference"].mean()) if len(counted) else None,
        "mean_server_over_estimate": float((counted["prompt_tokens"] / counted["estimate_tokens"]).mean())
        if len(counted) else None,
    }


def plot(df: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), gridspec_kw={"width_ratios": [3, 2, 1.3]})
    bottom = pd.Series(0, index=df.index, dtype=float)
    for column in SECTIONS:
        axes[0].bar(df["turn"], df[column], bottom=bottom, label=column.removeprefix("tok_"))
        bottom += df[column]
    axes[0].plot(df["turn"], df["budget"], "k--", label="budget")
    if df["window"].notna().any():
        axes[0].plot(df["turn"], df["window"], "r:", label="window")
    axes[0].set(title="Prompt tokens by section", xlabel="turn", ylabel="tokens")
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].scatter(df["estimate_tokens"], df["prompt_tokens"], s=12)
    top = max(df["estimate_tokens"].max(), df["prompt_tokens"].max() if df["prompt_tokens"].notna().any() else 0)
    axes[1].plot([0, top], [0, top], "k:", lw=1)
    axes[1].set(title="Server count vs our estimate", xlabel="estimate (cl100k)", ylabel="server prompt_tokens")
    counts = verdicts(df)
    axes[2].bar(counts.index, counts.values)
    axes[2].set(title="Accounting verdicts")
    axes[2].tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig
