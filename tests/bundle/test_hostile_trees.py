"""No file and no database makes a walk up the story tree loop.

Two of 10,000 fuzzed bundles (tests/data/bundle/) once hung the import for
ever: a branch that lost its id took its position as id, became its own
parent, and `path_to` never reached the root. Branch ids are now checked
present and unique before anything walks the tree, and every walk visits a
branch at most once, so a loop is a refusal naming the branch wherever it is
met: in a file, or in a database changed by hand (play, undo, restore a save
point, export). Every call here runs under a 10 s alarm (`guard.within`), so a
regression fails instead of freezing the run.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from guard import within
from reference_files import aged, v3
from sqlalchemy import func, select, update

from engine import BrokenStory, BundleRefused, Workbench
from engine.store import BranchRow, CampaignRow
from engine.story.lineage import path_to

DATA = Path(__file__).resolve().parents[1] / "data" / "bundle"
HANGS = ["bundle-hang-a.json", "bundle-hang-b.json"]


def campaigns(wb) -> int:
    with wb.db.reading() as s:
        return s.scalar(select(func.count()).select_from(CampaignRow))


def refused_fast(counted, source, *words) -> str:
    """Refused with BundleRefused in under a second, every table's row count unchanged."""
    wb, census = counted
    before, rows = campaigns(wb), census()
    started = time.perf_counter()
    with pytest.raises(BundleRefused) as caught:
        within(10, lambda: wb.import_campaign(source))
    assert time.perf_counter() - started < 1.0
    assert campaigns(wb) == before and census() == rows, "a refused import wrote rows"
    message = str(caught.value)
    for word in words:
        assert word in message, (word, message)
    assert message.endswith("Nothing was imported.")
    return message


# ------------------------------------------------------------------ the two files that hung
@pytest.mark.parametrize("name", HANGS)
def test_the_bundles_that_hung_are_refused_in_words_in_under_a_second(counted, name):
    assert "id" not in json.loads((DATA / name).read_text(encoding="utf-8"))["branches"][1]  # kept as found
    refused_fast(counted, DATA / name, "Branch entry 2 has no id")


@pytest.mark.parametrize("name", HANGS)
def test_they_are_refused_through_import_file_and_as_parsed_json_too(counted, name):
    wb, census = counted
    rows = census()
    for source in (DATA / name, json.loads((DATA / name).read_text(encoding="utf-8"))):
        with pytest.raises(BundleRefused, match="has no id"):
            within(10, lambda source=source: wb.import_file(source))
    assert census() == rows


def test_the_same_file_with_the_id_restored_imports(counted):
    """The refusal is about the lost id, not the rest of the file."""
    wb, _ = counted
    data = json.loads((DATA / "bundle-hang-a.json").read_text(encoding="utf-8"))
    data["branches"][1]["id"] = 2
    report, seconds = within(10, lambda: wb.import_campaign(data))
    assert seconds < 1.0 and report.counts["branches"] == 3
    assert wb.campaign(report.campaign_id).history()[-1].text == "Two."


# ------------------------------------------------------------------ branch ids in a reference file
@pytest.mark.parametrize("era", ["v3", "pre-m9"])  # with take parents, and without (they are derived from the tree)
def test_a_branch_without_an_id_is_refused_naming_its_entry(counted, era):
    data = v3() if era == "v3" else aged(era)
    del data["branches"][2]["id"]
    refused_fast(counted, data, "Branch entry 3 has no id")


@pytest.mark.parametrize("era", ["v3", "pre-m9"])
def test_two_branches_with_one_id_are_refused(counted, era):
    data = v3() if era == "v3" else aged(era)
    data["branches"][2]["id"] = data["branches"][1]["id"]
    refused_fast(counted, data, "Branch entries 2 and 3 both call themselves 2")


@pytest.mark.parametrize("value", [None, "2", 2.0, [2], {"id": 2}, True])
def test_a_branch_id_that_is_not_a_whole_number_is_refused(counted, value):
    data = aged("pre-m9")
    data["branches"][1]["id"] = value
    refused_fast(counted, data, "Branch entry 2")


@pytest.mark.parametrize("parent", [2, 3, 99])  # itself, a later branch, no branch at all
def test_a_branch_whose_parent_is_itself_or_later_or_missing_is_refused(counted, parent):
    data = aged("pre-m9")
    data["branches"][1]["parent"] = parent
    refused_fast(counted, data, "Branch 2")


def test_a_loop_through_two_branches_is_refused(counted):
    data = aged("pre-m9")
    data["branches"][1]["parent"], data["branches"][2]["parent"] = 3, 2
    refused_fast(counted, data, "Branch 2")


def test_every_branch_with_its_id_imports_as_before(counted):
    wb, _ = counted
    report, _ = within(10, lambda: wb.import_campaign(aged("pre-m9")))
    assert report.counts["branches"] == 3 and report.counts["nodes"] == 9


# ------------------------------------------------------------------ the walk itself
@pytest.mark.parametrize("table, start, named", [
    ({1: (1, 0)}, 1, 1),  # its own parent
    ({1: (None, -1), 2: (3, 0), 3: (2, 0)}, 2, 2),  # two branches, each the other's parent
    ({1: (None, -1), 2: (3, 0), 3: (4, 0), 4: (2, 0)}, 3, 3),  # a longer ring
])
def test_a_walk_round_a_loop_is_refused_naming_the_branch(table, start, named):
    with pytest.raises(BrokenStory) as caught:
        within(10, lambda: path_to(table, start, 2**31 - 1))
    assert caught.value.branch == named and f"Branch {named} is its own ancestor" in str(caught.value)
    assert "wb.backups()" in str(caught.value)


def test_a_walk_that_reaches_a_missing_branch_is_refused_naming_it():
    with pytest.raises(BrokenStory, match="branch 7, which the campaign does not have"):
        path_to({1: (None, -1), 2: (7, 3)}, 2, 10)


def test_a_walk_visits_each_branch_at_most_once_on_a_long_line():
    """100,000 branches in one chain: the bound is the number of branches, not a guess."""
    table = {0: (None, -1), **{i: (i - 1, i - 1) for i in range(1, 100_000)}}
    path, seconds = within(10, lambda: path_to(table, 99_999, 2**31 - 1))
    assert len(path.segments) == 100_000 and seconds < 1.0


# ------------------------------------------------------------------ a database changed by hand
@pytest.fixture
def looped(wb):
    """A played campaign whose root branch was made its own parent, forking
    at depth 0, in the file: the walk from the head never falls below 0."""
    camp = wb.new_campaign("Loop", opening="The tide is out.")
    camp.act("walk out onto the sand")
    point = camp.save_point("On the sand")
    with wb.db.writing() as s:
        root = s.get(CampaignRow, camp.id).head_branch_id
        s.execute(update(BranchRow).where(BranchRow.id == root).values(parent_id=root, fork_depth=0))
    return wb, camp, point, root


@pytest.mark.parametrize("call", ["history", "act", "undo", "restore", "context"])
def test_a_looped_tree_in_the_database_is_refused_in_words_wherever_it_is_walked(looped, call):
    wb, camp, point, root = looped
    action = {"history": camp.history, "act": lambda: camp.act("look back"), "undo": camp.undo,
              "restore": lambda: camp.restore(point), "context": lambda: camp.context("look back")}[call]
    with pytest.raises(BrokenStory) as caught:
        within(10, action)
    assert caught.value.branch == root and f"Branch {root} is its own ancestor" in str(caught.value)


def test_an_export_of_a_looped_tree_is_written_and_marked_not_importable(looped, tmp_path):
    """Export copies rows and walks nothing; its own check runs the importer,
    which refuses the loop, so the report says the file cannot come back."""
    wb, camp, _, _ = looped
    report, _ = within(10, lambda: camp.export(tmp_path / "loop.json"))
    assert report.path.exists() and not report.importable and "root" in report.warning
    with pytest.raises(BundleRefused):
        within(10, lambda: wb.import_campaign(report.path))


def test_a_backup_of_a_looped_database_opens_and_says_so_when_read(looped, tmp_path):
    wb, camp, _, root = looped
    backup = wb.backup()
    other = Workbench.open(backup.path, background=False)
    try:
        with pytest.raises(BrokenStory, match=f"Branch {root} is its own ancestor"):
            within(10, lambda: other.campaign(camp.id).history())
    finally:
        other.close()


def test_the_v7_migration_leaves_a_record_on_a_looped_tree_as_it_was():
    """The frozen copy of the walk (store/frozen/v7_records.py) stops too:
    the step keeps such a record in its old form rather than loop."""
    from engine.store.frozen.v7_records import path_to as frozen_path_to
    from engine.store.record_tables import _Lines

    with pytest.raises(ValueError, match="its own ancestor"):
        within(10, lambda: frozen_path_to({1: (1, 0)}, 1, 5))
    lines = _Lines.__new__(_Lines)
    lines.nodes, lines.at, lines.branches = {9: (1, 1, 3)}, {}, {1: {1: (1, 0)}}
    assert within(10, lambda: lines.of(9, 0, 3))[0] is None
    lines.branches = {1: {1: (5, 0)}}  # a parent that is not there
    assert lines.of(9, 0, 3) is None
