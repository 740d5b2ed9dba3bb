import json

import pandas as pd

from experiments import accounting, block_trim
from experiments.results import MIME, Results, read_metrics
from experiments.scrub import scrub


def test_results_write_a_sidecar_and_read_back_from_a_notebook(tmp_path):
    r = Results("demo", tmp_path / "demo.json", parameters={"turns": 3})
    r.record(ratio=__import__("numpy").float32(2.5), missing=float("nan"))
    path = r.save()
    saved = json.loads(path.read_text())
    assert saved == {"experiment": "demo", "parameters": {"turns": 3}, "metrics": {"ratio": 2.5, "missing": None}}
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {MIME: {"experiment": "demo", "metrics": {"a": 1}}}},
        {"output_type": "display_data", "data": {MIME: {"experiment": "demo", "metrics": {"a": 2, "b": 3}}}}]}]}
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    assert read_metrics(tmp_path / "x.ipynb") == {"a": 2, "b": 3}


def test_scrub_removes_volatile_metadata(tmp_path):
    nb = {"metadata": {"papermill": {"start_time": "t", "end_time": "t", "duration": 1.0, "input_path": "/a",
                                     "output_path": "/b", "parameters": {"x": 1}}},
          "cells": [{"cell_type": "code", "metadata": {"execution": {"x": 1}, "papermill": {"duration": 2,
                                                                                             "status": "completed"}},
                     "outputs": [], "source": ""}]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    cleaned = json.loads(scrub(path).read_text())
    assert cleaned["metadata"]["papermill"] == {"parameters": {"x": 1}}
    assert cleaned["cells"][0]["metadata"] == {"papermill": {"status": "completed"}}


def test_block_trim_summary_and_speedup():
    rows = []
    for fraction, evaluated, prefill in ((0, 1000, 2.0), (4, 100, 0.5)):
        for turn in range(1, 5):
            rows.append({"fraction": fraction, "turn": turn, "prompt_tokens": 1200, "reused_tokens": 1200 - evaluated,
                         "evaluated_tokens": evaluated, "prefill_s": prefill, "turn_s": prefill + 1,
                         "floor_depth": None if fraction == 0 else 10 + 2 * (turn // 3), "history_included": 9})
    df = pd.DataFrame(rows)
    table = block_trim.summarise(df)
    assert table.loc[4, "floor_steps"] == 1 and table.loc[0, "floor_steps"] == 0
    speed = block_trim.speedup(df, 4)
    assert speed["prefill_ratio"] == 4.0 and speed["evaluated_ratio"] == 10.0


def test_accounting_metrics_from_a_scripted_campaign(camp):
    # CountingNarrator's 10 reported prompt tokens fit only within a 16,384 budget's safety reserve.
    camp.workbench.configure(context_budget=16384)
    for text in ("go north", "go south"):
        camp.act(text)
    df = accounting.frame(camp)
    m = accounting.metrics(df)
    assert m["turns"] == 2 and m["verdicts"] == {"fits": 2}
    assert 0 < m["max_estimate_share_of_budget"] < 1
    assert (df[accounting.SECTIONS].sum(axis=1) > 0).all()


def test_until_accepted_retries_refused_turns_and_reports_them():
    import pytest

    from engine import TurnFailed
    from experiments.retrying import until_accepted

    answers = iter([TurnFailed("only protocol"), TurnFailed("only protocol"), "turn"])

    def turn():
        value = next(answers)
        if isinstance(value, Exception):
            raise value
        return value

    refused = []
    assert until_accepted(turn, refused=refused) == "turn" and refused == ["only protocol"] * 2
    with pytest.raises(TurnFailed):
        until_accepted(lambda: (_ for _ in ()).throw(TurnFailed("never")), attempts=2)
    assert until_accepted(lambda: (_ for _ in ()).throw(TurnFailed("never")), required=False) is None


def test_sidecars_go_to_scratch_unless_evidence_is_asked_for(monkeypatch):
    from experiments import results

    monkeypatch.delenv(results.EVIDENCE_SWITCH, raising=False)
    assert results.sidecar_path("calibrate") == results.SCRATCH / "calibrate.json"
    asked = results.EVIDENCE / "token_accounting.json"
    assert results.sidecar_path("token_accounting", asked) == results.SCRATCH / "token_accounting.json"
    monkeypatch.setenv(results.EVIDENCE_SWITCH, "1")
    assert results.sidecar_path("token_accounting", asked) == asked


def test_a_run_outside_make_evidence_leaves_the_evidence_untouched(tmp_path, monkeypatch, capsys):
    from experiments import results

    evidence, scratch = tmp_path / "evidence", tmp_path / "scratch"
    evidence.mkdir()
    (evidence / "token_accounting.json").write_text("recorded\n")
    monkeypatch.setattr(results, "EVIDENCE", evidence)
    monkeypatch.setattr(results, "SCRATCH", scratch)
    monkeypatch.delenv(results.EVIDENCE_SWITCH, raising=False)
    r = Results("token_accounting", evidence / "token_accounting.json")
    r.record(turns=3)
    assert r.save() == scratch / "token_accounting.json"
    assert (evidence / "token_accounting.json").read_text() == "recorded\n"
    assert "make evidence" in capsys.readouterr().out
    monkeypatch.setenv(results.EVIDENCE_SWITCH, "1")
    Results("token_accounting", evidence / "token_accounting.json").save()
    assert json.loads((evidence / "token_accounting.json").read_text())["experiment"] == "token_accounting"


def test_an_explicit_path_elsewhere_is_honoured(tmp_path, monkeypatch):
    from experiments import results

    monkeypatch.delenv(results.EVIDENCE_SWITCH, raising=False)
    assert Results("demo", tmp_path / "mine.json").save() == tmp_path / "mine.json"


def test_scrub_drops_frozen_progress_bars_but_keeps_real_messages(tmp_path):
    bar = {"output_type": "stream", "name": "stderr", "text": "Loading weights:   0%|          | 0/103\r"}
    frozen = {"output_type": "stream", "name": "stderr", "text": "Loading weights 0%\n"}
    redrawn = {"output_type": "stream", "name": "stderr", "text": ["batches:  50%|█████ | 1/2\r", "batches: 100%|██| 2/2\n"]}
    warning = {"output_type": "stream", "name": "stderr", "text": "UserWarning: 5% of pairs were skipped\n"}
    printed = {"output_type": "stream", "name": "stdout", "text": "Coverage: 100% of pairs\n"}
    nb = {"metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "source": "",
                                     "outputs": [bar, frozen, redrawn, warning, printed]}]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    kept = json.loads(scrub(path).read_text())["cells"][0]["outputs"]
    assert kept == [warning, printed]
