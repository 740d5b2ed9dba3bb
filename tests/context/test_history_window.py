"""trim_block and history_floor: the prefix-stable history window (checks 40-43)."""
import pytest

from engine.context import history
from engine.context.history import MIN_TRIM_BLOCK, TRIM_FRACTION, history_floor, trim_block


def test_trim_block_is_a_quarter_of_what_fits():
    assert trim_block(8000, 500) == 16 // TRIM_FRACTION == 4
    assert trim_block(16000, 500) > trim_block(8000, 500)
    assert trim_block(8000, 500) == trim_block(8000, 500)


@pytest.mark.parametrize("budget", [0, 1, 100, 499])
def test_trim_block_never_below_the_minimum(budget):
    assert trim_block(budget, 500) >= MIN_TRIM_BLOCK >= 2


@pytest.mark.parametrize("fraction, block", [(2, 8), (8, 2), (1000, 2)])
def test_the_dial(monkeypatch, fraction, block):
    monkeypatch.setattr(history, "TRIM_FRACTION", fraction)
    assert history.trim_block(8000, 500) == block


@pytest.mark.parametrize("depths, costs, budget", [
    ([], [], 1000),                         # empty
    ([0, 1, 2], [100, 100, 100], 1000),     # fits whole: keep the opening
    ([0, 1, 2], [100, 100, 2000], 1000),    # the newest alone is too big: caller truncates
    ([0, None, 2], [100] * 3, 150),         # a node with no depth: nothing to anchor on
])
def test_floor_is_none(depths, costs, budget):
    assert history_floor(depths, costs, budget, 4) is None


def floors(n_from, n_to):
    return [history_floor(list(range(1, n + 1)), [100] * n, 1000, 4) for n in range(n_from, n_to)]


@pytest.mark.parametrize("n", range(20, 40))
def test_floor_is_a_block_multiple_and_the_window_fits(n):
    floor = history_floor(list(range(1, n + 1)), [100] * n, 1000, 4)
    kept = 100 * (n - floor + 1)
    assert floor % 4 == 0 and 600 <= kept <= 1000


def test_floor_holds_then_steps_and_never_goes_back():
    values = floors(20, 45)
    assert values == sorted(values)
    first_ten = floors(20, 30)
    changes = sum(a != b for a, b in zip(first_ten, first_ten[1:], strict=False))
    assert 1 <= changes <= 3
