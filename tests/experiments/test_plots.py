"""The one-line token plot draws what the records say."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from engine import NotAllowed  # noqa: E402
from experiments.plots import STACK, plot_tokens, token_stack  # noqa: E402


def test_the_stack_adds_up_to_each_turns_estimate(camp):
    for text in ("go north", "go south", "wait"):
        camp.act(text)
    records = camp.records()
    stack = token_stack(records)
    assert list(stack.columns) == STACK and list(stack.index) == [1, 2, 3]
    assert (stack.sum(axis=1).to_numpy() == records["estimate_tokens"].to_numpy()).all()
    assert (stack["tok_history"].diff().dropna() > 0).all()  # the history grows turn by turn


def test_plot_tokens_draws_one_bar_per_turn_per_section(camp):
    for text in ("go north", "go south"):
        camp.act(text)
    fig = plot_tokens(camp)
    ax = fig.axes[0]
    drawn = {c.get_label(): len(c.patches) for c in ax.containers}
    nonzero = [c.removeprefix("tok_") for c in STACK if token_stack(camp.records())[c].any()]
    assert sorted(drawn) == sorted(nonzero) and set(drawn.values()) == {2}
    labels = [line.get_label() for line in ax.get_lines()]
    assert "budget" in labels and "server counted" in labels


def test_an_empty_campaign_says_so(camp):
    with pytest.raises(NotAllowed, match="play a turn first"):
        plot_tokens(camp)
