"""One declaration per setting: `Settings.check` and the settings panel read
the same bounds, choices, labels and help, and only the fields of the chosen
narrator are checked."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine import Workbench, WorkbenchError
from engine.settings import SPECS, Settings, propose
from widgets.settings_panel import _control, adjust, panel_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(tmp_path):
    wb = Workbench.open(tmp_path / "s.db", background=False)
    yield wb
    wb.close()


def test_the_check_and_the_panel_read_one_bound():
    """trim_fraction was capped at 64 in the panel and unbounded in check; now both read SPECS."""
    spec = SPECS["trim_fraction"]
    assert (spec.low, spec.high) == (0, 64)
    assert "trim_fraction must be between 0 and 64, not 65" in Settings(trim_fraction=65).problems()[0]
    assert adjust("trim_fraction", 65) == (64, "History trim (1/N) 65 is more than the most it can be (between 0 "
                                               "and 64): 64 was used.")


def test_no_bound_or_choice_is_spelled_in_the_panel():
    """The panel module has no number literal for a bound and no choice list of its own."""
    tree = ast.parse((ROOT / "widgets" / "settings_panel.py").read_text())
    numbers = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) in (int, float)}
    bounds = {v for s in SPECS.values() for v in (s.low, s.high) if v not in (None, 0, 1)}
    assert not numbers & bounds, numbers & bounds
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not {words for s in SPECS.values() for _, words in s.choices} & strings


@pytest.mark.parametrize("name", panel_settings())
def test_each_panel_control_is_built_from_its_declaration(name):
    spec = SPECS[name]
    control = _control(name, spec, Settings.__dataclass_fields__[name].type.replace(" | None", ""))
    assert f"(setting: {name})" in control.tooltip and (spec.label in (control.description or ""))
    if spec.choices:
        assert [v for _, v in control.options] == [v for v, _ in spec.choices]


def test_labels_are_human_and_every_panel_setting_has_help():
    for name in panel_settings():
        assert SPECS[name].label != name and "_" not in SPECS[name].label and SPECS[name].help, name


def test_a_plain_default_is_still_a_setting():
    """A field declared without setting(...) is typed, stored and labelled by its name."""
    from dataclasses import dataclass, fields

    from engine.settings import _spec_of

    @dataclass
    class Extra:
        words_per_line: int = 8

    assert _spec_of(fields(Extra)[0]).label == "Words per line"


def test_only_the_chosen_narrators_fields_are_checked(bench):
    bench.configure(endpoint_url="http://8.8.8.8/v1")  # stored while nothing uses it
    bench.configure(max_output_tokens=300)  # and it never blocks another change
    assert bench.settings.max_output_tokens == 300
    with pytest.raises(WorkbenchError, match="that endpoint can't be used"):
        bench.configure(narrator="endpoint", model="m")  # checked as soon as it is used
    with pytest.raises(WorkbenchError, match="that endpoint can't be used"):
        bench.configure(embedder="endpoint", embedding_model="nomic")
    assert bench.settings.narrator == "local" and bench.settings.embedder == "local"


def test_the_model_window_is_checked_only_for_the_embedded_narrator():
    assert "n_ctx must be between 256 and 1,048,576 tokens, not 10" in Settings(n_ctx=10).problems()
    assert not [p for p in propose(Settings(n_ctx=4096), {"narrator": "endpoint", "endpoint_url":
                                                            "http://127.0.0.1:11434/v1", "model": "m"}).problems()]


def test_the_story_budget_follows_the_window_until_set_and_again_after_none(bench):
    assert bench.settings.context_budget == 4096 and bench.settings.follows("context_budget")
    bench.configure(n_ctx=8192)
    assert bench.settings.context_budget == 8192
    bench.configure(context_budget=6000)
    assert not bench.settings.follows("context_budget")
    bench.configure(n_ctx=2048, max_output_tokens=100)
    assert bench.settings.context_budget == 6000  # set by hand: it stays
    with Workbench.open(bench.db.path) as again:
        assert again.settings.context_budget == 6000
    bench.configure(context_budget=None)  # follows again
    assert bench.settings.context_budget == 2048 and bench.settings.follows("context_budget")
    with Workbench.open(bench.db.path) as again:
        assert again.settings.context_budget == 2048 and again.settings.follows("context_budget")


def test_with_a_server_the_following_budget_is_the_references_default(bench):
    bench.configure(endpoint="http://127.0.0.1:11434/v1", model="m")
    assert bench.settings.context_budget == 16_384


def test_cross_field_rules_name_both_labels_for_people():
    problem = Settings(max_output_tokens=5000).problems(named=False)
    assert problem == ["Reply length must be smaller than Story budget (5000 is not less than 4096)"]
    assert Settings(narrator="endpoint").problems(named=False) == [
        "My server (OpenAI-compatible): fill in Server address, e.g. http://127.0.0.1:11434/v1",
        "My server (OpenAI-compatible): fill in Model name, e.g. qwen2.5:7b"]
