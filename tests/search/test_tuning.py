"""Tuning is a value: a changed copy reaches the search a turn runs, is
stored with the settings as its changes, and the report records it."""
from dataclasses import replace

import pytest

from engine import Workbench
from engine.errors import WorkbenchError
from engine.search import DEFAULT, Tuning


def test_a_changed_copy_round_trips_through_the_settings_file(tmp_path):
    wb = Workbench.open(tmp_path / "t.db")
    tuned = replace(DEFAULT, relative_cut=0.7, stage_candidates=25, floors=(("some/model", 0.5),))
    wb.configure(tuning=tuned)
    wb.close()
    again = Workbench.open(tmp_path / "t.db")
    assert again.settings.tuning == tuned and again.settings.tuning.floor_override("some/model") == 0.5
    assert DEFAULT.relative_cut == 0.9  # the defaults are never changed by a copy
    again.close()


def test_a_stored_tuning_keeps_only_its_changes():
    tuned = replace(DEFAULT, judged=3)
    assert tuned.changes() == {"judged": 3}
    assert Tuning.from_changes(tuned.changes()) == tuned


def test_nonsense_is_refused_in_words():
    with pytest.raises(WorkbenchError, match="number of 0 or more"):
        replace(DEFAULT, relative_cut=-1)
    with pytest.raises(WorkbenchError, match="Unknown search tuning"):
        Tuning.from_changes({"relativ_cut": 0.5})
    with pytest.raises(WorkbenchError, match="seven numbers"):
        replace(DEFAULT, fusion=(1.0, 2.0))


def test_the_turns_report_records_the_tuning_it_ran_with(tmp_path):
    wb = Workbench.open(tmp_path / "r.db")
    wb.configure(embedder="none", tuning=replace(DEFAULT, max_terms=12))
    camp = wb.new_campaign("Abbey", premise="An abbey on the moor.", protagonist="Wren")
    camp.knowledge.add("abbey.md", "# The Old Abbey\n\nThe crypt under the abbey holds the ossuary of the monks.\n")
    report = camp.context("I go down into the crypt under the abbey.")
    knowledge = report.knowledge if hasattr(report, "knowledge") else report["knowledge"]
    assert knowledge["tuning"]["changes"] == {"max_terms": 12} and knowledge["tuning"] == wb.settings.tuning.record()
    assert knowledge["tuning"]["sha256"] != DEFAULT.record()["sha256"]
    wb.close()
