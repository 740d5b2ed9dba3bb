"""Property: every import either refuses in words and writes nothing, or
lands a campaign that exports again, in bounded time and memory.

Inputs are mutations of real exports (a rich played campaign in this
workbench's format and a reference-app v3 file): structured mutations put a
hostile value at a random place in the tree, byte mutations corrupt the
serialised file. Derandomised, so `make test` runs the same examples every
time; the counts are sized to finish in well under a minute on 2 cores.
"""
from __future__ import annotations

import json
import resource
import time

import pytest
from hostile import (
    CHARACTER_CARD,
    KOBOLD_SAVE,
    NOVELAI_LOREBOOK,
    PAYLOADS,
    SCENARIO,
    WORLD_INFO,
    build_rich,
    census,
    configure,
    v3,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Workbench, interop
from engine.bundle import BundleRefused, facade, load, validate
from engine.errors import WorkbenchError

pytestmark = pytest.mark.fuzz

# Values chosen from what broke imports by hand: wrong types, numbers no
# column holds, lone surrogates, deep nesting, markup, extreme dates.
HOSTILE = [None, True, 0, -1, 10**30, 2**63, 1.5, "", "x", "\ud800", "9999-12-31T23:59:59-14:00",
           "0001-01-01T00:00:00+14:00", [], {}, [[[[[[]]]]]], {"\ud800": 1}, {"": None}, [None], [{}], [-1],
           *PAYLOADS]
BYTE_SNIPPETS = [b'"\\ud800"', b"1e999", b"-1e999", b"1" * 40, b"[" * 80, b"}", b"]", b'"', b",", b"\x00",
                 b"\xff", b"NaN", b"null", b"{}", b'{"a":', b"\\"]
PER_EXAMPLE_SECONDS = 5.0
# Peak resident memory may grow by this much over the whole run (imports of
# small files; the bounds tests check the large-file cases one by one).
RSS_GROWTH_KB = 512 * 1024


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-source")
    wb = Workbench.open(folder / "source.db", background=False)
    report = build_rich(wb).export(folder / "rich.json")
    wb.close()
    return [json.loads(report.path.read_bytes()), v3()]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    wb = Workbench.open(tmp_path_factory.mktemp("fuzz-target") / "target.db", background=False)
    configure(wb)
    yield wb
    wb.close()


def _places(value, path=()):
    """Every (path) in a JSON tree, the root included."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _places(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value[:6]):  # the first few entries of each list stand for the rest
            yield from _places(child, (*path, index))


def _mutated(document, path, action, value):
    copy = json.loads(json.dumps(document))
    if not path:
        return value
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if action == "delete":
        del parent[path[-1]]
    elif action == "wrap":
        parent[path[-1]] = [parent[path[-1]]]
    else:
        parent[path[-1]] = value
    return copy


@st.composite
def structured(draw, exports):
    document = draw(st.sampled_from(exports))
    places = list(_places(document))
    mutations = draw(st.lists(st.tuples(st.sampled_from(places), st.sampled_from(["set", "set", "delete", "wrap"]),
                                        st.sampled_from(HOSTILE)), min_size=1, max_size=3))
    for path, action, value in mutations:
        try:
            document = _mutated(document, path, action, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this place
    return json.dumps(document).encode()


@st.composite
def corrupted(draw, exports):
    raw = bytearray(json.dumps(draw(st.sampled_from(exports))).encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw) - 1))
        snippet = draw(st.sampled_from(BYTE_SNIPPETS))
        if draw(st.booleans()):
            raw[at:at + len(snippet)] = snippet
        else:
            del raw[at:at + draw(st.integers(1, 64))]
    return bytes(raw)


def _files(exports):
    return st.one_of(structured(exports), corrupted(exports))


def _timed(call):
    started = time.perf_counter()
    result = call()
    assert time.perf_counter() - started < PER_EXAMPLE_SECONDS
    return result


def test_reading_any_mutation_refuses_in_words_or_plans(exports):
    """Pure reading, many examples: BundleRefused with a sentence, or a Plan."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    @settings(max_examples=2500, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_files(exports))
    def check(raw):
        try:
            _timed(lambda: validate(load(raw)))
        except BundleRefused as refused:
            assert str(refused).strip().endswith((".", ")")) and len(str(refused)) > 20

    check()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < RSS_GROWTH_KB


def test_importing_any_mutation_is_total(exports, target, tmp_path_factory):
    """Through the database: a refusal writes zero rows; an import exports,
    and that export imports again."""
    folder = tmp_path_factory.mktemp("fuzz-exports")
    outcome = {"refused": 0, "imported": 0}

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_files(exports))
    def check(raw):
        before = census(target.db.path)
        try:
            report = _timed(lambda: target.import_campaign(raw))
        except BundleRefused:
            assert census(target.db.path) == before, "a refused import wrote rows"
            outcome["refused"] += 1
            return
        camp = target.campaign(report.campaign_id)
        camp.history()
        exported = camp.export(folder / f"{report.campaign_id}.json")
        assert exported.importable, exported.warning
        target.import_campaign(exported.path)
        outcome["imported"] += 1

    check()
    assert outcome["refused"] and outcome["imported"], outcome  # both paths were exercised


@pytest.mark.parametrize("importer, document", [
    (interop.import_ai_dungeon, SCENARIO), (interop.import_ai_dungeon, SCENARIO["storyCards"]),
    (interop.import_sillytavern, WORLD_INFO), (interop.import_file, CHARACTER_CARD),
    (interop.import_file, KOBOLD_SAVE), (interop.import_file, NOVELAI_LOREBOOK),
], ids=["AI Dungeon scenario", "AI Dungeon cards", "SillyTavern World Info", "character card", "KoboldAI save",
        "NovelAI lorebook"])
def test_other_tools_files_are_total(importer, document, target, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-other")

    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_files([document]))
    def check(raw):
        before = census(target.db.path)
        try:
            report = _timed(lambda: importer(target.db, raw))
        except WorkbenchError as refused:
            assert census(target.db.path) == before, "a refused import wrote rows"
            assert len(str(refused)) > 20
            return
        exported = target.campaign(report.campaign_id).export(folder / f"{report.campaign_id}.json")
        assert exported.importable, exported.warning

    check()


# ------------------------------------------------------------------ the arguments, not the file
# What a caller can pass besides the file: placeholder answers, ids, names,
# flags and paths, each also hostile. A lone surrogate in an answer used to
# reach the database and end in a raw UnicodeEncodeError (12 of 400 fuzzed
# AI Dungeon imports).
ARGUMENT_VALUES = [None, True, False, 0, 1, -1, 2**63, 2**70, 1.5, float("nan"), "", "x", "\ud800", "a\udfffb",
                   "\x00", "x" * 20_000, [], {}, ["\ud800"], {"\ud800": "x"}, {"Name?": "\ud800"}, {"Name?": 7},
                   {"Name?": ["x"]}, {1: "x"}, {"Name?": "Ila"}, b"\xff", object()]
OPTIONS = {
    "file": {"campaign_id": None, "as_knowledge": None, "classification": None, "answers": None,
             "character_as": ["cast", "protagonist", "premise"], "protagonist": ["Ila"]},
    "ai_dungeon": {"campaign_id": None, "as_knowledge": None, "classification": None, "answers": None},
    "sillytavern": {"campaign_id": None, "as_knowledge": None, "classification": None, "protagonist": ["Ila"]},
    "campaign": {},
}


@pytest.fixture(scope="module")
def argument_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("argument-files")
    for name, document in (("scenario.json", SCENARIO), ("world.json", WORLD_INFO), ("card.json", CHARACTER_CARD)):
        (folder / name).write_text(json.dumps(document))
    return folder


@st.composite
def import_calls(draw, folder, campaign_id):
    kind = draw(st.sampled_from(sorted(OPTIONS)))
    real = [folder / "scenario.json", folder / "world.json", folder / "card.json", str(folder / "scenario.json"),
            SCENARIO, WORLD_INFO, CHARACTER_CARD]
    hostile_paths = [str(folder / "\ud800.json"), str(folder / "nul\x00.json"), "x" * 5000, str(folder),
                     str(folder / "missing.json"), folder / "a\udcff.json", 42, None, 1.5, object()]
    source = draw(st.sampled_from(real + hostile_paths))
    options = {}
    for name, good in OPTIONS[kind].items():
        if draw(st.booleans()):
            options[name] = draw(st.sampled_from([*ARGUMENT_VALUES, campaign_id, *(good or [])]))
    return kind, source, options


def _importer(kind):
    return {"file": interop.import_file, "ai_dungeon": interop.import_ai_dungeon,
            "sillytavern": interop.import_sillytavern,
            "campaign": lambda db, source, **_: facade.import_campaign(db, source)}[kind]


def test_no_import_argument_ends_in_a_raw_error(target, argument_files):
    """Property over the arguments of import_file, import_ai_dungeon,
    import_sillytavern and import_campaign: an import lands, or it is
    refused with a sentence (a WorkbenchError) and writes nothing."""
    campaign_id = target.new_campaign("Argument target").id
    outcome = {"refused": 0, "imported": 0}

    @settings(max_examples=400, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(import_calls(argument_files, campaign_id))
    def check(call):
        kind, source, options = call
        before = census(target.db.path)
        try:
            _timed(lambda: _importer(kind)(target.db, source, **options))
        except WorkbenchError as refused:
            assert census(target.db.path) == before, "a refused import wrote rows"
            message = str(refused)
            assert len(message) > 20 and message.strip().endswith((".", ")")), message
            message.encode("utf-8")  # printable: no lone surrogate echoed back
            outcome["refused"] += 1
            return
        outcome["imported"] += 1

    check()
    assert outcome["refused"] and outcome["imported"], outcome


@pytest.mark.parametrize("importer, source, options, words", [
    ("ai_dungeon", SCENARIO, {"answers": {"Name?": "\ud800"}}, "lone surrogate"),
    ("ai_dungeon", SCENARIO, {"answers": {"\ud800": "Ila"}}, "lone surrogate"),
    ("ai_dungeon", SCENARIO, {"answers": ["Ila"]}, "answers must be a dict"),
    ("file", SCENARIO, {"campaign_id": 2**70}, "campaign_id must be a campaign's id"),
    ("file", SCENARIO, {"campaign_id": True}, "campaign_id must be a campaign's id"),
    ("file", CHARACTER_CARD, {"protagonist": "a\ud800"}, "protagonist holds a lone surrogate"),
    ("sillytavern", WORLD_INFO, {"as_knowledge": "yes"}, "as_knowledge must be True or False"),
    ("file", CHARACTER_CARD, {"character_as": ["cast"]}, "character_as must be one of"),
    ("file", "\ud800.json", {}, "no file name can hold"),
    ("campaign", "\ud800.json", {}, "no file name can hold"),
    ("campaign", "nul\x00.json", {}, "NUL"),
])
def test_hostile_arguments_are_refused_in_words(target, importer, source, options, words):
    before = census(target.db.path)
    with pytest.raises(BundleRefused, match=words):
        _importer(importer)(target.db, source, **options)
    assert census(target.db.path) == before
