import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import texts

from engine import NotFound, Workbench, WorkbenchError

TESTS = Path(__file__).parent


def test_settings_persist_and_bad_values_are_refused_in_words(db_path):
    wb = Workbench.open(db_path)
    wb.configure(context_budget=8192, max_output_tokens=300)
    with pytest.raises(WorkbenchError, match="timeout_seconds must be between 30 and 3600"):
        wb.configure(timeout_seconds=5)
    with pytest.raises(WorkbenchError, match="Unknown setting"):
        wb.configure(budget=3)
    wb.close()
    again = Workbench.open(db_path)
    assert again.settings.context_budget == 8192 and again.settings.max_output_tokens == 300
    assert again.settings.timeout_seconds == 300


def test_campaigns_list_and_reopen(wb):
    a = wb.new_campaign("A")
    b = wb.new_campaign("B")
    assert [c.id for c in wb.campaigns()] == [a.id, b.id]
    assert wb.campaign(b.id).title == "B"
    with pytest.raises(NotFound, match="wb.campaigns"):
        wb.campaign(999)
    with pytest.raises(WorkbenchError, match="needs a title"):
        wb.new_campaign("  ")


def test_records_have_one_row_per_turn(camp):
    camp.act("go north")
    camp.continue_story()
    camp.direct("Bring rain.")
    camp.retry()
    df = camp.records()
    assert list(df["turn"]) == [1, 2, 3]
    assert list(df["mode"]) == ["act", "continue", "direct"]
    assert list(df["input"]) == ["> You go north.", "", "Bring rain."]
    assert list(df["takes"]) == [1, 1, 2] and list(df["take"]) == [1, 1, 2]
    assert (df["estimate_tokens"] > 0).all() and (df["words"] == 2).all()


def test_campaign_displays_its_story_with_markup_made_inert(wb, camp):
    from narrators import ScriptedNarrator

    wb.configure(narrator=ScriptedNarrator(['<script>alert(1)</script> <a href="javascript:x()">go</a> <img src="http://evil/x.png">']))
    turn = camp.act("<b>shout</b>")
    page = camp._repr_html_()
    assert "<script>" not in page and "<a " not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;shout&lt;/b&gt;" in page
    assert "Cave" in page and "sea cave" in page
    assert "<script>" not in turn._repr_html_()


def test_a_second_process_reads_and_writes_the_same_file(camp, db_path):
    camp.act("go north")
    script = f"""
import sys, json
sys.path.insert(0, {str(TESTS)!r})
from narrators import ScriptedNarrator
from engine import Workbench
wb = Workbench.open({str(db_path)!r})
wb.configure(narrator=ScriptedNarrator(["From the other process."]))
camp = wb.campaign({camp.id})
seen = [e.text for e in camp.history()]
camp.act("wave")
print(json.dumps(seen))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[-1] == "Narration 1."
    assert texts(camp)[-2:] == ["> You wave.", "From the other process."]


def test_endpoint_narrator_is_refused_in_words_until_configured(db_path):
    wb = Workbench.open(db_path)
    with pytest.raises(WorkbenchError, match="needs endpoint_url"):
        wb.configure(narrator="endpoint")


def test_context_dry_run_calls_no_model_and_writes_nothing(wb, camp, narrator):
    from helpers import census

    camp.act("go north")
    before, prompts = census(wb), len(narrator.prompts)
    report = camp.context("I listen at the door")
    assert len(narrator.prompts) == prompts and census(wb) == before
    assert "> I listen at the door." in report["prompt"]["story"]
    assert report["history"]["total"] == 3
    assert "context-report" in report._repr_html_() and "The exact prompt" in report._repr_html_()
    assert "> You go north." in camp.context()["prompt"]["story"]


def test_records_carry_token_columns(wb, camp):
    # Set by hand: the story budget follows n_ctx (4,096) until set, and CountingNarrator's
    # 10 reported prompt tokens fit only within a 16,384 budget's safety reserve.
    wb.configure(context_budget=16384)
    camp.act("go north")
    row = camp.records().iloc[0]
    assert row["tok_system"] > 0 and row["tok_history"] > 0 and row["tok_hints"] > 0
    assert row["budget"] == 16384 and row["accounting"] == "fits"
    assert row["history_total"] == 1  # the opening; the input is priced as protected
