"""Turns and the connection test through the real HTTP path."""
from fake_server import FakeServer, Script

from engine import Workbench


def test_a_turn_stores_window_and_accounting_per_take(db_path):
    with FakeServer(Script(loaded={"story-model": 4096}, usage={"prompt_tokens": 150, "completion_tokens": 3})) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model="story-model")
        camp = wb.new_campaign("Fake", opening="A door.")
        estimate = camp.context("open the door")["tokens"]["estimate"]
        s.script.usage = {"prompt_tokens": estimate + 12, "completion_tokens": 3}  # a tokenizer a little off ours
        first = camp.act("open the door")
        assert first.text == "The door opens."
        assert first.window["tokens"] == 4096 and first.window["source"] == "loaded" and first.window["verified"]
        assert first.report["budget"]["effective"] == 4096 and first.report["window"]["capped"]
        assert first.accounting["status"] == "fits" and first.accounting["server_prompt_tokens"] == estimate + 12
        s.script.usage = None
        second = camp.retry()
        assert second.accounting["status"] == "unknown"
        camp.select_take(1)
        assert camp.turn(first.id).accounting["status"] == "fits"  # each take keeps its own
        df = camp.records()
        assert list(df["prompt_tokens"]) == [estimate + 12]


def test_window_smaller_than_budget_caps_the_prompt(db_path):
    with FakeServer(Script(loaded={"story-model": 2048})) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model="story-model", context_budget=16384, max_output_tokens=100)
        camp = wb.new_campaign("Small", opening="Start.")
        for _ in range(30):
            camp.act("walk a long way down the winding corridor of the old and crumbling keep")
        turn = camp.turn(camp.history()[-1].id)
        assert turn.report["estimate"] + 100 + turn.report["budget"]["reserve"] <= 2048


def test_connection_report_in_words(db_path):
    with FakeServer(Script(loaded={"story-model": 4096}, models=["story-model", "other"])) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model="story-model")
        report = wb.test_connection()
        assert report.ok and report.models == ["story-model", "other"] and report.model_found
        assert report.window["tokens"] == 4096 and report.window["verified"]
        assert "less than the 16,384-token story budget" in report.warning
        assert "<table>" in report._repr_html_()
        assert "/api/generate" not in s.paths()  # a connection test never loads a model
        wb.configure(model="missing")
        assert "does not offer a model named 'missing'" in wb.test_connection().warning
    down = wb.test_connection()
    assert not down.reachable and "Is the server running" in down.detail


def test_unverifiable_window_warns_and_declared_is_said(db_path):
    with FakeServer(Script(kind="plain")) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model="story-model")
        assert "could not be checked" in wb.test_connection().warning
        wb.configure(context_window_override=2048)
        report = wb.test_connection()
        assert report.window["source"] == "declared" and not report.window["verified"]
        assert "Nothing has verified that number" in report.warning


def test_local_connection_report(wb):
    from narrators import ScriptedNarrator

    wb.configure(narrator=ScriptedNarrator(window=2048))
    report = wb.test_connection()
    assert report.reachable and report.window["tokens"] == 2048


def test_connection_report_carries_the_servers_own_refusal(db_path):
    script = Script(fail={"/v1/models": 503}, error_style="ollama", fail_message="server busy loading qwen2.5:7b")
    with FakeServer(script) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model="story-model")
        report = wb.test_connection()
    assert not report.reachable and "HTTP 503; the server said: “server busy loading qwen2.5:7b”" in report.detail
