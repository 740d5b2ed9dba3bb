"""A real server's word over our own memory: the window asked every turn, the
server's errors in its own words, a tokenizer that counts more than ours
never overflowing a full window, and llama.cpp's model names."""
import pytest
from fake_server import FakeServer, Script

from engine import Workbench
from engine.errors import TurnFailed
from engine.providers import window as windows

# About 120 cl100k tokens of story input: four turns fill a 512-token share.
LONG_INPUT = ("walk the length of the flooded quay past the drowned nets, the broken lanterns and the crates "
              "stencilled with the marks of far ports, counting every bollard, every rope and every gull, ") * 3


@pytest.fixture(autouse=True)
def fresh_windows():
    windows.cache_clear()
    yield
    windows.cache_clear()


def bench(db_path, base, **settings):
    wb = Workbench.open(db_path, background=False)
    wb.configure(endpoint=base, model="story-model", embedder="none", memory_enabled=False,
                 auto_summarize=False, state_protocol=False, **settings)
    return wb


def test_a_restart_with_a_smaller_window_is_seen_by_the_next_turn(db_path):
    with FakeServer(Script(kind="llamacpp", props_ctx=8192)) as s:
        port = s.port
        wb = bench(db_path, s.base, max_output_tokens=100)
        camp = wb.new_campaign("Quay", opening="The bells have not rung for three days.")
        first = camp.act("open the door")
        assert first.report["budget"]["effective"] == 8192
    with FakeServer(Script(kind="llamacpp", props_ctx=2048), port=port):
        second = camp.act("open the door")
        assert second.report["budget"]["effective"] == 2048 and second.window["tokens"] == 2048
        assert second.window["changed_from"] == 8192 and "it was 8,192 when last asked" in second.window["detail"]
    with FakeServer(Script(kind="llamacpp", props_ctx=1024), port=port):
        report = wb.test_connection()  # never a remembered answer
    assert report.window["tokens"] == 1024 and report.window["verified"]
    assert "The window changed since the server was last asked: 2,048 then, 1,024 now" in report.warning


def test_a_failed_probe_does_not_outlive_the_turn(db_path):
    with FakeServer() as s:
        port, base = s.port, s.base
    wb = bench(db_path, base, max_output_tokens=100)
    camp = wb.new_campaign("Quay", opening="Start.")
    with pytest.raises(TurnFailed, match="Could not connect"):
        camp.act("open the door")
    with FakeServer(Script(kind="llamacpp", props_ctx=2048), port=port):
        report = wb.test_connection()
        assert report.reachable and report.window["verified"] and report.window["tokens"] == 2048
        turn = camp.act("open the door")
    assert turn.report["budget"]["effective"] == 2048 and turn.window["verified"]


@pytest.mark.parametrize("style", ["llamacpp", "ollama", "vllm"])
def test_the_servers_error_reaches_the_reader_through_a_turn(db_path, style):
    said = "Loading model, please wait"
    with FakeServer(Script(kind="llamacpp", fail={"/v1/chat/completions": 503}, error_style=style,
                           fail_message=said)) as s:
        camp = bench(db_path, s.base).new_campaign("Quay", opening="Start.")
        with pytest.raises(TurnFailed) as caught:
            camp.act("open the door")
    assert f"The server said: “{said}”" in str(caught.value) and "Nothing was written" in str(caught.value)
    assert camp.history()[-1].text == "Start."


def full_window_campaign(db_path, script, turns):
    with FakeServer(script) as s:
        # trim_fraction 0: history slides by one node, so every prompt is built to the brim
        wb = bench(db_path, s.base, max_output_tokens=100, trim_fraction=0)
        camp = wb.new_campaign("Quay", opening="The bells have not rung for three days.")
        played = [camp.act(LONG_INPUT) for _ in range(turns)]
        return played, list(s.served)


def test_a_tokenizer_counting_15_percent_more_never_overflows_a_full_window(db_path):
    script = Script(kind="llamacpp", props_ctx=4096, token_factor=1.15, reply=["word "] * 90)
    played, served = full_window_campaign(db_path, script, 54)  # the window is full from turn 14 on
    verdicts = [t.accounting["status"] for t in played]
    assert verdicts.count("exceeded") == 0 and set(verdicts) == {"fits"}
    assert len(served) == 54 and not any(x["cut"] for x in served)  # every reply whole, no refusal
    full = [x["prompt_tokens"] for x in served[14:]]
    assert len(full) == 40 and min(full) > 3500, full  # 4,096 less 100 for the reply less the 256 reserve: 3,740
    ratio = played[-1].report["window"]["token_ratio"]
    assert 1.14 < ratio < 1.2 and "/tokenize" in played[-1].report["window"]["ratio_detail"]
    assert played[-1].report["tokens"]["estimate"] >= played[-1].report["tokens"]["estimate_cl100k"] * 1.14


def test_without_tokenize_the_ratio_is_learned_from_reported_usage(db_path):
    script = Script(kind="vllm", max_model_len=4096, token_factor=1.15, tokenize=False, reply=["word "] * 90)
    played, served = full_window_campaign(db_path, script, 30)
    assert [t.accounting["status"] for t in played].count("exceeded") == 0
    assert not any(x["cut"] for x in served) and len(served) == 30
    assert min(x["prompt_tokens"] for x in served[14:]) > 3400
    assert "reported" in played[-1].report["window"]["ratio_detail"]


def test_the_ratio_is_kept_in_the_file(db_path):
    script = Script(kind="llamacpp", props_ctx=4096, token_factor=1.3)
    with FakeServer(script) as s:
        bench(db_path, s.base).new_campaign("Quay", opening="Start.").act("open the door")
        again = Workbench.open(db_path)
        s.script.tokenize = False  # the reopened workbench can only have it from the file
        window = again.narrator.context_window()
    assert 1.25 < window.token_ratio < 1.4 and "measurement" in window.ratio_detail


@pytest.mark.parametrize("name, found", [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", True), ("SmolLM2-135M-Instruct.Q4_1", True), ("smol", True),
    ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", True), ("qwen2.5:7b", False),
])
def test_connection_finds_a_llamacpp_model_by_file_name_or_alias(db_path, name, found):
    script = Script(kind="llamacpp", models=["/models/SmolLM2-135M-Instruct.Q4_1.gguf"], aliases=["smol"])
    with FakeServer(script) as s:
        wb = Workbench.open(db_path)
        wb.configure(endpoint=s.base, model=name)
        report = wb.test_connection()
    assert report.model_found is found and report.ok is found


def test_each_take_stores_the_servers_cache_figures(db_path):
    with FakeServer(Script(kind="llamacpp", timings=True, cached=100)) as s:
        camp = bench(db_path, s.base).new_campaign("Quay", opening="Start.")
        first = camp.act("open the door")
        s.script.timings, s.script.cached = False, None
        second = camp.retry()
    assert {k: first.usage[k] for k in ("prompt_tokens", "cached_tokens", "processed_tokens", "prompt_ms",
                                        "generation_ms")} == {"prompt_tokens": 120, "cached_tokens": 100,
                                                              "processed_tokens": 20, "prompt_ms": 12.5,
                                                              "generation_ms": 40.25}
    assert second.usage["cached_tokens"] is None and second.usage["prompt_tokens"] == 120
    assert camp.turn(first.id).usage["cached_tokens"] == 100  # each take keeps its own


@pytest.mark.parametrize("script, expected", [
    (Script(kind="llamacpp", timings=True, cached=100), (120, 100, 20, 12.5, 40.25)),
    (Script(kind="ollama", ollama_figures=True, cached=30, loaded={"story-model": 4096}), (120, 30, 90, 30.0, 90.0)),
    (Script(kind="vllm", cached=64), (120, 64, 56, None, None)),
    (Script(kind="plain"), (120, None, None, None, None)),
], ids=["llamacpp", "ollama", "vllm", "none"])
def test_records_show_the_servers_cache_figures_for_each_shape(db_path, script, expected):
    with FakeServer(script) as s:
        camp = bench(db_path, s.base).new_campaign("Quay", opening="Start.")
        camp.act("open the door")
        row = camp.records().iloc[-1]
    got = tuple(None if row[k] is None or row[k] != row[k] else row[k]  # NaN is "not reported"
                for k in ("prompt_tokens", "cached_tokens", "processed_tokens", "prompt_ms", "generation_ms"))
    assert got == expected


def test_a_prompt_the_server_counts_too_long_is_not_sent_and_the_next_one_fits(db_path):
    with FakeServer(Script(kind="llamacpp", props_ctx=2048, token_factor=1.0, reply=["word "] * 50)) as s:
        wb = bench(db_path, s.base, max_output_tokens=100, trim_fraction=0)
        camp = wb.new_campaign("Quay", opening="Start.")
        for _ in range(12):
            camp.act(LONG_INPUT)  # the window is full and the ratio measured at 1.0
        s.script.token_factor = 1.5  # the model behind the port was swapped for one with another tokenizer
        with pytest.raises(TurnFailed, match="By the server's own count this prompt is .* so it was not sent"):
            camp.act(LONG_INPUT)
        turn = camp.act(LONG_INPUT)
        served = list(s.served)
    assert len(served) == 13 and not any(x["cut"] for x in served)  # the refused prompt never left
    assert turn.accounting["status"] == "fits" and turn.report["window"]["token_ratio"] >= 1.5
