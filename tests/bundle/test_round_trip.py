"""A campaign leaves one database as a file and arrives whole in another,
opened by another process: the acceptance test of bundles (CI-01..09)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from campaigns import configure, snapshot

from engine import Workbench
from engine.bundle import FORMAT, VERSION, validate
from engine.turns import record

TESTS = Path(__file__).resolve().parents[1]


def import_elsewhere(bundle: Path, target: Path) -> dict:
    """Import `bundle` into a brand-new file in a separate Python process and
    return (report, snapshot, census) as it saw them."""
    script = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'bundle')!r}]
        from campaigns import census, configure, snapshot
        from engine import Workbench
        wb = Workbench.open({str(target)!r}, background=False)
        configure(wb)
        report = wb.import_campaign({str(bundle)!r})
        out = {{"report": {{"campaign_id": report.campaign_id, "can_undo": report.can_undo,
                           "can_redo": report.can_redo, "repaired": report.repaired, "dropped": report.dropped,
                           "warnings": report.warnings}},
               "snapshot": snapshot(wb, report.campaign_id),
               "settings": {{"endpoint_url": wb.settings.endpoint_url, "model": wb.settings.model}}}}
        wb.close()
        out["census"] = census({str(target)!r})
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def source_snapshot(rich) -> dict:
    path, campaign_id, _ = rich
    wb = Workbench.open(path, background=False)
    configure(wb)
    try:
        return snapshot(wb, campaign_id)
    finally:
        wb.close()


def test_a_campaign_arrives_whole_in_another_process(rich, tmp_path):
    before = source_snapshot(rich)
    target = tmp_path / "elsewhere" / "fresh.db"
    assert not target.exists()
    target.parent.mkdir()
    arrived = import_elsewhere(rich[2], target)
    after = arrived["snapshot"]
    for family in before:
        assert after[family] == before[family], family
    # the undone campaign opens where it was left, with its future kept
    assert arrived["report"]["can_redo"] and arrived["report"]["can_undo"]
    assert after["can"] == [True, True, True]
    assert len(after["nodes"]) > len(after["transcript"])
    # nothing needed repairing, and nothing was lost on the way
    assert arrived["report"]["repaired"] == [] and arrived["report"]["dropped"] == []
    assert arrived["report"]["warnings"] == [] or all("Story cards" in w for w in arrived["report"]["warnings"])
    # the families the acceptance list names, checked for substance
    assert {e[1] for e in after["events"]} == {"narrator", "correction"}
    assert any(not e[3] for e in after["events"])  # a refused event travels as refused
    assert after["memories"][0][8] > 0 and after["memories"][0][11]  # use count kept; vector rebuilt
    assert [k[2:6] for k in after["knowledge"]] == [["canon", True, "normal", True], ["canon", True, "hidden", False],
                                                     ["reference", False, "normal", False]]
    assert all(k[8] == "ready" and k[12] for k in after["knowledge"])
    assert after["retrieved"] and "draft" not in after["retrieved"]
    assert all(r[2].get("prompt", {}).get("system") for r in after["records"])
    assert len(after["cards"]) == 2 and after["save_point_views"][0][0] == "At the door"


def test_the_destination_is_a_fresh_file_with_its_own_settings(rich, tmp_path):
    arrived = import_elsewhere(rich[2], tmp_path / "other.db")
    assert arrived["settings"] == {"endpoint_url": "", "model": ""}
    counts = arrived["census"]
    assert counts["settings"] == 0  # nothing about the source machine was written
    assert counts["derived_status"] == 0
    assert counts["campaigns"] == 1


def test_the_export_names_its_format_and_checks_itself(rich):
    payload = json.loads(rich[2].read_text(encoding="utf-8"))
    assert payload["format"] == FORMAT and payload["version"] == VERSION
    plan = validate(payload)
    assert plan.notes.repaired == [] and plan.notes.dropped == []
    parents = [b["parent"] for b in payload["branches"]]
    assert parents[0] is None and all(p < b["id"] for p, b in zip(parents[1:], payload["branches"][1:], strict=True))


def test_no_machine_fact_travels(rich, tmp_path):
    text = rich[2].read_text(encoding="utf-8")
    for needle in ("api_key", "source.db", str(rich[0].parent), "endpoint_url", "vector", "derived_status",
                   "content_hash_of_passages", "knowledge_passages"):
        assert needle not in text, needle


def test_the_endpoint_is_removed_from_turn_evidence(fresh, tmp_path):
    fresh.configure(endpoint_url="http://127.0.0.1:11434/v1", narrator=fresh.narrator)
    camp = fresh.new_campaign("Evidence", opening="It begins.")
    camp.act("wait")
    from engine.store import TurnRecordRow

    with fresh.db.writing() as s:
        record = s.get(TurnRecordRow, camp.history()[-1].id)
        record.window = {**record.window, "detail": "asked http://127.0.0.1:11434/api/ps"}
    report = camp.export(tmp_path / "evidence.json")
    text = report.path.read_text(encoding="utf-8")
    assert "11434" not in text and "fresh.db" not in text
    assert report.machine_text_removed == 1


def test_an_export_report_says_size_and_importability(rich, fresh, tmp_path):
    camp = fresh.new_campaign("Small", opening="A small start.")
    report = camp.export(tmp_path)  # a directory: the file gets a dated name
    assert report.path.parent == tmp_path and report.path.name.startswith("small-")
    assert report.bytes == report.path.stat().st_size and report.importable and report.warning == ""
    assert "importable by this version" in report._repr_html_()


def test_an_oversized_export_is_written_and_says_it_cannot_come_back(fresh, tmp_path, monkeypatch):
    from engine.bundle import limits

    camp = fresh.new_campaign("Big", opening="A start.")
    monkeypatch.setattr(limits, "MAX_BUNDLE_BYTES", 100)
    report = camp.export(tmp_path / "big.json")
    assert report.path.exists() and not report.importable and "import limit" in report.warning


def test_reexporting_an_import_gives_the_same_file_apart_from_its_date(rich, fresh, tmp_path):
    imported = fresh.import_campaign(rich[2])
    again = fresh.campaign(imported.campaign_id).export(tmp_path / "again.json")
    first = json.loads(rich[2].read_text(encoding="utf-8"))
    second = json.loads(again.path.read_text(encoding="utf-8"))
    first.pop("exported_at"), second.pop("exported_at")
    assert first == second


def test_the_import_report_displays_itself_escaped(fresh, tmp_path):
    camp = fresh.new_campaign("<script>alert(1)</script>", opening="Hi.")
    path = camp.export(tmp_path / "x.json").path
    report = fresh.import_campaign(path)
    html = report._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert str(report).startswith("Imported")


def test_an_export_taken_while_turns_commit_is_one_consistent_moment(fresh, tmp_path):
    import threading

    camp = fresh.new_campaign("Busy", opening="It begins.")
    camp.act("start")
    done, failures = threading.Event(), []

    def writer():
        try:
            for i in range(25):
                camp.act(f"walk {i}")
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    exports = []
    while not done.is_set() or not exports:
        exports.append(json.loads(camp.export(tmp_path / f"busy-{len(exports)}.json")
                                  .path.read_text(encoding="utf-8")))
    thread.join(60)
    assert not failures
    for payload in exports:
        plan = validate(payload)  # no hole, no head past the story, nothing to repair
        assert plan.notes.repaired == [] and plan.notes.dropped == []
        assert payload["head"]["depth"] == max(n["depth"] for n in payload["nodes"])


def test_version_2_keeps_each_prompt_text_once_and_every_prompt_comes_back(rich, fresh):
    payload = json.loads(rich[2].read_text(encoding="utf-8"))
    assert payload["version"] == 2 and payload["prompt_texts"]
    referenced = set().union(*(record.hashes_of(n["record"]["report"]) for n in payload["nodes"] if n["record"]))
    assert referenced == set(payload["prompt_texts"])  # exactly what the records need, once each
    assert all(record.text_hash(t) == h for h, t in payload["prompt_texts"].items())
    before = Workbench.open(rich[0], background=False)
    imported = fresh.campaign(fresh.import_campaign(rich[2]).campaign_id)
    source = before.campaign(rich[1])
    for old, new in zip(source.records(takes="all").node_id, imported.records(takes="all").node_id, strict=True):
        assert imported.turn(int(new)).report.get("prompt") == source.turn(int(old)).report.get("prompt")
    before.close()


def test_a_version_1_bundle_with_full_reports_still_imports_and_shows_its_prompt(fresh):
    from engine.bundle.native import read_v1  # noqa: F401  (the reader version 1 files get)

    report = {"sections": [{"name": "history", "part": "story", "tokens": 3, "text": "It begins."}],
              "prompt": {"system": "Narrate.", "story": "It begins."}, "tokens": {"budget": 2048}}
    bundle = {"format": FORMAT, "version": 1, "campaign": {"title": "Old"}, "head": {"branch": 1, "depth": 1},
              "branches": [{"id": 1, "parent": None, "fork_depth": -1}],
              "nodes": [{"id": 1, "branch": 1, "depth": 0, "parent": None, "kind": "start", "text": "It begins."},
                        {"id": 2, "branch": 1, "depth": 1, "parent": 1, "kind": "narrator", "text": "Rain.",
                         "record": {"narrator": "old", "report": report}}]}
    camp = fresh.campaign(fresh.import_campaign(bundle).campaign_id)
    turn = camp.turn(camp.history()[-1].id)
    assert turn.report["prompt"] == {"system": "Narrate.", "story": "It begins."}
    assert camp.records().record_version.tolist() == [2]


def test_a_mismatched_text_is_refiled_and_a_missing_one_drops_only_its_record(rich, fresh):
    payload = json.loads(rich[2].read_text(encoding="utf-8"))
    key, value = next(iter(payload["prompt_texts"].items()))
    payload["prompt_texts"][key] = value + " (edited by hand)"
    plan = validate(payload)
    assert any("its own hash" in line for line in plan.notes.repaired) and not plan.notes.dropped
    assert key not in plan.texts and record.text_hash(value + " (edited by hand)") in plan.texts
    del payload["prompt_texts"][next(iter(payload["prompt_texts"]))]
    plan = validate(payload)
    dropped = [line for line in plan.notes.dropped if "prompt text the file lacks" in line]
    assert dropped and sum(n.record is not None for n in plan.nodes) < sum(bool(n["record"]) for n in payload["nodes"])
