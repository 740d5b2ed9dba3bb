"""Imports are bounded and total: each hostile file found by hand is refused
in words, writes nothing, and costs bounded time and memory; what imports
exports again."""
from __future__ import annotations

import base64
import copy
import json
import threading
import time
import tracemalloc
import zlib

import pytest
from hostile import census, configure, v3

from engine import Workbench
from engine.bundle import BundleRefused, limits, load, validate
from engine.errors import NotFound


@pytest.fixture
def wb(tmp_path):
    bench = Workbench.open(tmp_path / "target.db", background=False)
    configure(bench)
    yield bench
    bench.close()


def _refused_cleanly(wb, data, *words) -> str:
    before = census(wb.db.path)
    with pytest.raises(BundleRefused) as caught:
        wb.import_campaign(data)
    assert census(wb.db.path) == before, "a refused import wrote rows"
    message = str(caught.value)
    assert "Nothing was imported" in message
    for word in words:
        assert word in message, message
    return message


def _bytes(payload) -> bytes:
    return json.dumps(payload).encode()


def _within(seconds: float, call):
    """Runs `call` in a thread; fails (instead of hanging the suite) when it spins."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_branch_parents_in_a_cycle_are_refused_not_spun(wb):
    bundle = v3()
    bundle.pop("stateProposals")  # they name action ids, which this file no longer has
    for action in bundle["actions"]:
        action.pop("id")  # no ids: lineage is derived from the branches, where the cycle is
    bundle["branches"] = [{"id": 1, "parent": 2, "forkDepth": 0}, {"id": 2, "parent": 1, "forkDepth": 0}]
    started = time.perf_counter()
    with pytest.raises(BundleRefused, match="root|fork"):
        _within(10, lambda: validate(load(_bytes(bundle))))
    assert time.perf_counter() - started < 2


def _bomb(inflated_bytes: int) -> str:
    packer = zlib.compressobj(9)
    head = b'{"prompt": {"system": "'
    chunks = [packer.compress(head)]
    block = b" " * (1024 * 1024)
    for _ in range(inflated_bytes // len(block)):
        chunks.append(packer.compress(block))
    chunks.append(packer.compress(b'"}}') + packer.flush())
    return base64.b64encode(b"".join(chunks)).decode()


def test_a_zip_bomb_snapshot_is_dropped_within_its_cap(wb):
    bundle = v3()
    bomb = _bomb(256 * 1024 * 1024)
    assert len(bomb) < 1024 * 1024  # a small file claiming a quarter of a gigabyte
    for action in bundle["actions"]:
        if action["type"] == "ai":
            action.pop("contextSnapshot", None)
            action["contextSnapshotZ"] = bomb
    tracemalloc.start()
    try:
        report = wb.import_campaign(_bytes(bundle))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert any("compressed prompt snapshot" in line for line in report.dropped)
    assert peak < 3 * limits.MAX_SNAPSHOT_BYTES + 64 * 1024 * 1024, f"peak {peak:,} bytes"
    assert wb.campaign(report.campaign_id).export(wb.db.path.parent / "again.json").importable


def test_a_small_file_of_millions_of_objects_is_refused_before_parsing(wb):
    raw = b'{"format": "story-workbench-campaign", "version": 1, "story_cards": [' + b"{}," * 8_000_000 + b"{}]}"
    tracemalloc.start()
    try:
        with pytest.raises(BundleRefused, match="memory"):
            load(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"peak {peak:,} bytes for a {len(raw):,}-byte file"


def test_parsing_a_text_heavy_file_costs_a_few_times_its_size():
    prose = "The lantern gutters; cold stone answers. " * 400
    payload = {"format": "story-workbench-campaign", "version": 1,
               "nodes": [{"id": i, "text": prose, "record": {"report": {"prompt": {"system": prose}}}}
                         for i in range(600)]}
    raw = json.dumps(payload).encode()
    tracemalloc.start()
    try:
        load(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert limits.parse_cost(raw) < limits.MAX_PARSE_BYTES
    assert peak < 4 * len(raw), f"{peak / len(raw):.1f}x"


@pytest.mark.parametrize("depth", [limits.MAX_DEPTH + 1, 100_000])
def test_deep_nesting_is_refused(wb, depth):
    bundle = v3()
    bundle["campaignCanon"] = {"rules": []}
    raw = _bytes(bundle).replace(b'"rules": []', b'"rules": ' + b"[" * depth + b"]" * depth)
    _refused_cleanly(wb, raw, "nested")


def test_deep_nesting_inside_a_compressed_snapshot_is_dropped(wb):
    bundle = v3()
    deep = "[" * 5000 + "]" * 5000
    packed = base64.b64encode(zlib.compress(f'{{"prompt": {deep}}}'.encode())).decode()
    bundle["actions"][3]["contextSnapshotZ"] = packed
    report = wb.import_campaign(_bytes(bundle))
    assert any("compressed prompt snapshot" in line for line in report.dropped)


@pytest.mark.parametrize("literal, words", [
    (b"1" * 4300, ["digits"]),
    (b"1" * 25, ["digits"]),
    (b"1e999", ["infinity"]),
    (b"-1e999", ["infinity"]),
    (b"NaN", ["not a JSON number"]),
])
def test_numbers_no_database_can_hold_are_refused(wb, literal, words):
    raw = _bytes(v3()).replace(b'"headDepth": 4', b'"headDepth": ' + literal)
    _refused_cleanly(wb, raw, *words)


def test_a_depth_of_ten_to_the_thirty_is_refused(wb):
    bundle = v3()
    bundle["actions"][1]["depth"] = 10**30
    _refused_cleanly(wb, bundle, "too large")


@pytest.mark.parametrize("place", ["title", "state key", "canon key", "card key", "snapshot", "event"])
def test_a_lone_surrogate_anywhere_is_refused(wb, place):
    bundle = v3()
    lone = "bad\ud800half"
    if place == "title":
        bundle["title"] = lone
    elif place == "state key":
        bundle["narrativeState"]["entities"][lone] = {"type": "character", "name": "X"}
    elif place == "canon key":
        bundle["campaignCanon"][lone] = ["x"]
    elif place == "card key":
        bundle["storyCards"][0]["keys"] = [lone]
    elif place == "snapshot":
        bundle["actions"][2]["contextSnapshot"]["prompt"]["system"] = lone
    else:
        bundle["stateEvents"][0]["payload"]["name"] = lone
    raw = json.dumps(bundle).encode()  # ensure_ascii keeps the lone half as \ud800
    _refused_cleanly(wb, raw, "surrogate")
    _refused_cleanly(wb, bundle, "surrogate")  # handed over as a dict, not a file


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_an_extreme_date_is_refused_or_imports_and_exports(wb, when, tmp_path):
    bundle = v3()
    bundle["actions"][0]["createdAt"] = when
    try:
        report = wb.import_campaign(_bytes(bundle))
    except BundleRefused as refused:
        assert "Nothing was imported" in str(refused)
        return
    assert wb.campaign(report.campaign_id).export(tmp_path / "again.json").importable


@pytest.mark.parametrize("mutate", [
    lambda b: b["actions"][0].update(id=[1]),
    lambda b: b["actions"][0].update(id={"a": 1}, parentId=[2]),
    lambda b: b["branches"][1].update(id=[2]),
    lambda b: b["branches"][1].update(parent={"x": 1}),
    lambda b: b.update(headBranch=[1]),
    lambda b: b["checkpoints"][0].update(branch=[1]),
    lambda b: b["stateEvents"][0].update(action=[12]),
    lambda b: b["stateProposals"][0].update(action={"x": 1}),
    lambda b: b["memories"][0].update(branch={"x": 1}),
    lambda b: b.update(storyCards=[{"keys": {"a": 1}}]),
], ids=lambda f: "")
def test_wrong_types_in_the_reference_format_are_refused_or_repaired(wb, mutate, tmp_path):
    bundle = copy.deepcopy(v3())
    mutate(bundle)
    before = census(wb.db.path)
    try:
        report = wb.import_campaign(bundle)
    except BundleRefused as refused:
        assert "Nothing was imported" in str(refused)
        assert census(wb.db.path) == before
        return
    assert wb.campaign(report.campaign_id).export(tmp_path / "again.json").importable


def test_ai_dungeon_into_a_missing_campaign_is_not_found(wb):
    before = census(wb.db.path)
    scenario = {"title": "Cards", "prompt": "You wake.", "storyCards": [{"keys": "a", "value": "A."}]}
    with pytest.raises(NotFound, match="9999"):
        wb.import_ai_dungeon(scenario, campaign_id=9999)
    with pytest.raises(NotFound, match="9999"):
        wb.import_ai_dungeon(scenario["storyCards"], campaign_id=9999)
    assert census(wb.db.path) == before
