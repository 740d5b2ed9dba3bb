"""A wrong setting is refused with a sentence that names it, says what it
should be, and changes nothing."""
from __future__ import annotations

import numpy as np
import pytest

from engine import Workbench, WorkbenchError


@pytest.fixture
def bench(tmp_path):
    wb = Workbench.open(tmp_path / "s.db", background=False)
    yield wb
    wb.close()


@pytest.mark.parametrize(("change", "words"), [
    ({"context_budget": "big"}, "context_budget must be a whole number such as 8192, not 'big' (str)"),
    ({"temperature": "warm"}, "temperature must be a number such as 0.8"),
    ({"memory_enabled": "yes"}, "memory_enabled must be True or False"),
    ({"context_budget": True}, "context_budget must be a whole number"),
    ({"model": 7}, "model must be text in quotes"),
    ({"context_window_override": "8k"}, "context_window_override must be a whole number such as 8192 or None"),
])
def test_a_value_of_the_wrong_kind_is_refused_in_words(bench, change, words):
    before = bench.settings
    with pytest.raises(WorkbenchError) as caught:
        bench.configure(**change)
    assert words in str(caught.value) and "not changed" in str(caught.value)
    assert bench.settings == before
    with Workbench.open(bench.db.path) as again:  # nothing reached the file either
        assert again.settings == before


def test_numbers_of_other_types_are_stored_as_the_declared_type(bench):
    bench.configure(context_budget=np.int64(8192), temperature=1, context_window_override=None)
    assert bench.settings.context_budget == 8192 and type(bench.settings.context_budget) is int
    assert bench.settings.temperature == 1.0 and type(bench.settings.temperature) is float


def test_an_unknown_setting_suggests_the_near_name_and_lists_endpoint(bench):
    with pytest.raises(WorkbenchError) as caught:
        bench.configure(contxt_budget=8192)
    message = str(caught.value)
    assert "did you mean context_budget?" in message
    assert "endpoint= (sets endpoint_url" in message and "context_budget=" in message


def test_a_name_with_no_near_neighbour_gets_no_guess(bench):
    with pytest.raises(WorkbenchError) as caught:
        bench.configure(zzz=1)
    assert "did you mean" not in str(caught.value) and "'zzz'" in str(caught.value)
