import pytest

from engine.budget.ratios import classify_usage


def verdict(prompt, estimate=3000, budget=4096, out=400, verified=True):
    return classify_usage({"prompt_tokens": prompt}, estimate=estimate, budget=budget,
                          max_output_tokens=out, window_verified=verified)


@pytest.mark.parametrize("prompt", [None, 0, -5, 3.0, True, "3000"])
def test_no_count_is_unknown_never_a_fit(prompt):
    result = verdict(prompt)
    assert result["status"] == "unknown" and "nothing confirms" in result["detail"]


def test_fits_records_the_margin():
    result = verdict(3100)
    assert result["status"] == "fits" and result["observed_margin"] == 4096 - 400 - 3100
    assert result["difference"] == 100


def test_truncation_suspected_when_the_server_read_far_less():
    # Ollama at a 4,096 window reported 2,050 of 13,875 tokens with HTTP 200.
    result = verdict(2050, estimate=13875, budget=16384)
    assert result["status"] == "truncation_suspected" and "cuts from the start" in result["detail"]


def test_exceeded_when_prompt_and_reply_pass_the_budget():
    assert verdict(3800)["status"] == "exceeded"


def test_unverified_window_is_said():
    assert verdict(3100, verified=False)["detail"].endswith("not verified for this turn.")


def test_the_ratio_table_comes_with_the_v8_migration_and_an_older_file_gains_it(tmp_path):
    import sqlite3

    from engine.budget.ratios import TokenRatios
    from engine.store import Database, migrations

    step = [m.run for m in migrations.MIGRATIONS].index(migrations._token_ratios)
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for number, migrate in enumerate(migrations.MIGRATIONS[:step], start=1):
        migrate(raw)
        raw.execute(f"PRAGMA user_version = {number}")
    raw.close()
    ratios = TokenRatios(Database(path))
    assert ratios.get("m @ http://127.0.0.1:8080") is None
    assert ratios.observe("m @ http://127.0.0.1:8080", 1.15, "tokenize") == 1.15
    assert ratios.observe("m @ http://127.0.0.1:8080", 1.05, "usage") == pytest.approx(1.13)
    assert ratios.observe("m @ http://127.0.0.1:8080", 1.2, "usage") == 1.2
    kept = TokenRatios(Database(path)).get("m @ http://127.0.0.1:8080")
    assert kept["samples"] == 3 and kept["ratio"] == 1.2 and kept["source"] == "usage"


def test_a_lower_reading_pulls_the_ratio_down_by_a_fifth_a_higher_one_at_once():
    from engine.budget.ratios import next_ratio

    assert next_ratio(None, 1.1) == 1.1
    assert next_ratio(1.1, 1.3) == 1.3
    assert next_ratio(1.3, 1.0) == pytest.approx(1.24)


def test_a_reply_the_server_stopped_at_the_window_edge_is_marked_incomplete():
    cut = classify_usage({"prompt_tokens": 4000, "completion_tokens": 96}, estimate=3900, budget=4096,
                         max_output_tokens=200, window_verified=True)
    assert cut["status"] == "exceeded" and cut["reply_cut"] and "this reply is incomplete" in cut["detail"]
    whole = classify_usage({"prompt_tokens": 4000, "completion_tokens": 40}, estimate=3900, budget=4096,
                           max_output_tokens=200, window_verified=True)
    assert whole["status"] == "exceeded" and not whole["reply_cut"]
    assert not verdict(3100)["reply_cut"]
