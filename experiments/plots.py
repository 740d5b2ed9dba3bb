"""One-line plots of a campaign's records.

    from experiments.plots import plot_tokens
    plot_tokens(camp)            # or plot_tokens(camp.records(takes="all"))

Each bar is one narration's prompt, stacked by section (system rules and
canon, knowledge, history, summary, memories, state, hints, then the framing
the estimate counts beyond the sections), against the budget and the window
it was built to, with the server's own prompt-token count as dots.
"""
from __future__ import annotations

import pandas as pd

from engine.errors import NotAllowed
from engine.turns.record import SECTION_COLUMNS

__all__ = ["STACK", "plot_tokens", "token_stack"]

STACK = [*SECTION_COLUMNS, "framing"]
# Matplotlib's tab10, in the stack's order, so a section keeps its colour
# from one plot to the next whatever is empty.
_COLOURS = dict(zip(STACK, ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                            "#bbbbbb"], strict=True))


def token_stack(records: pd.DataFrame) -> pd.DataFrame:
    """Per narration, the tokens of each stacked part, indexed by turn. "framing"
    is the estimate less the sections (chat template, separators); a turn
    with no record (an edit) is all zeros."""
    sections = records[list(SECTION_COLUMNS)].apply(pd.to_numeric, errors="coerce").fillna(0)
    estimate = pd.to_numeric(records["estimate_tokens"], errors="coerce")
    framing = (estimate - sections.sum(axis=1)).clip(lower=0).fillna(0)
    stack = sections.assign(framing=framing)
    stack.index = records["turn"].to_numpy()
    stack.index.name = "turn"
    return stack


def plot_tokens(source, *, ax=None, title: str | None = None):
    """The per-turn section stack of `source` (a Campaign or a records DataFrame);
    returns the matplotlib Figure."""
    records = source.records() if hasattr(source, "records") else source
    if records.empty:
        raise NotAllowed("There are no narrations to plot yet: play a turn first.")
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(records) + 3), 3.8))
    else:
        fig = ax.figure
    stack = token_stack(records)
    turns = stack.index.to_numpy()
    bottom = pd.Series(0.0, index=stack.index)
    for column in STACK:
        if stack[column].any():
            ax.bar(turns, stack[column], bottom=bottom, color=_COLOURS[column], width=0.8,
                   label=column.removeprefix("tok_"))
            bottom += stack[column]
    _line(ax, turns, records["budget"], "k--", "budget")
    _line(ax, turns, records["window"], "r:", "window")
    served = pd.to_numeric(records["prompt_tokens"], errors="coerce")
    if served.notna().any():
        ax.plot(turns, served, "ko", markersize=3, label="server counted")
    ax.set(xlabel="turn", ylabel="prompt tokens", title=title or "Where each turn's prompt tokens went")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def _line(ax, turns, values, style: str, label: str) -> None:
    values = pd.to_numeric(values, errors="coerce")
    if values.notna().any():
        ax.plot(turns, values.to_numpy(), style, label=label, linewidth=1)
