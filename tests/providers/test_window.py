"""Every window source, asked afresh each time, the declared override and the cold load."""
import pytest
from fake_server import FakeServer, Script

from engine.providers import window as w
from engine.providers.http import make_client


@pytest.fixture(autouse=True)
def fresh_cache():
    w.cache_clear()
    yield
    w.cache_clear()


def probe(server, model="story-model", **kw):
    return w.probe(make_client(), server.base, model, **kw)


def test_ollama_loaded_model_reports_its_window():
    with FakeServer(Script(loaded={"story-model": 4096}, num_ctx=16384)) as s:
        win = probe(s)
    assert (win.tokens, win.source, win.verified) == (4096, w.LOADED, True)


def test_ollama_num_ctx_capped_by_the_architecture():
    with FakeServer(Script(num_ctx=999999, arch_ctx=32768)) as s:
        win = probe(s)
    assert (win.tokens, win.source, win.model_max, win.verified) == (32768, w.PARAMETERS, 32768, True)


def test_ollama_without_num_ctx_is_unknown_not_4096():
    with FakeServer(Script(num_ctx=None)) as s:
        win = probe(s)
    assert win.tokens is None and win.source == w.UNKNOWN and not win.verified
    assert win.reachable and "no num_ctx" in win.detail


def test_llamacpp_props():
    with FakeServer(Script(kind="llamacpp", props_ctx=8192)) as s:
        win = probe(s)
    assert (win.tokens, win.source, win.verified) == (8192, w.PROPS, True)


def test_vllm_max_model_len():
    with FakeServer(Script(kind="vllm", max_model_len=16384)) as s:
        win = probe(s)
    assert (win.tokens, win.source, win.verified) == (16384, w.MODELS, True)


def test_a_server_that_cannot_say_is_unknown():
    with FakeServer(Script(kind="plain")) as s:
        win = probe(s)
    assert win.tokens is None and win.reachable and "did not say" in win.detail


def test_nothing_listening_is_unknown_and_unreachable():
    with FakeServer() as s:
        base = s.base
    win = w.probe(make_client(), base, "story-model")
    assert win.tokens is None and not win.reachable and "could not ask" in win.detail


def test_refused_endpoint_is_unknown_without_asking():
    win = w.probe(make_client(), "http://8.8.8.8:11434/v1", "m")
    assert win.tokens is None and "not allowed" in win.detail


def test_the_server_is_asked_every_time_and_a_change_is_said():
    with FakeServer(Script(kind="llamacpp", props_ctx=8192)) as s:
        assert probe(s).tokens == 8192 and probe(s).changed_from is None
        s.script.props_ctx = 2048  # the server restarted with -c 2048
        now = probe(s)
        assert s.paths().count("/props") == 3
    assert (now.tokens, now.changed_from, now.verified) == (2048, 8192, True)
    assert "it was 8,192 when last asked" in now.detail


def test_a_failed_probe_is_not_remembered():
    with FakeServer() as s:
        port = s.port
    down = w.probe(make_client(), f"http://127.0.0.1:{port}/v1", "story-model")
    assert not down.reachable
    with FakeServer(Script(kind="llamacpp", props_ctx=2048), port=port) as s:
        assert w.probe(make_client(), s.base, "story-model").tokens == 2048


def test_a_llamacpp_server_is_asked_its_own_question_first():
    with FakeServer(Script(kind="llamacpp")) as s:
        probe(s)
        probe(s)
        assert s.paths() == ["/api/ps", "/props", "/props"]


@pytest.mark.parametrize("wanted, offered, aliases, found", [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", (), True),
    ("SmolLM2-135M-Instruct.Q4_1", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", (), True),
    ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", (), True),
    ("smol", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", ("smol",), True),
    ("qwen2.5:7b", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", ("smol",), False),
    ("qwen2.5:7b", "qwen2.5:7b", (), True),
    ("qwen2.5", "qwen2.5:7b", (), False),
])
def test_model_names_match_llamacpp_paths_and_aliases(wanted, offered, aliases, found):
    assert w.model_matches(wanted, offered, aliases) is found


def test_declared_override_only_when_the_server_cannot_say():
    with FakeServer(Script(kind="plain")) as s:
        win = probe(s, declared=6000)
    assert (win.tokens, win.source, win.verified) == (6000, w.DECLARED, False)
    assert "declared in settings" in win.detail
    with FakeServer(Script(kind="vllm", max_model_len=16384)) as s:
        assert probe(s, declared=6000).tokens == 16384  # a reported window always wins


def test_declared_applies_with_no_endpoint_and_is_never_verified():
    win = w.probe(make_client(), "", "", declared=3000)
    assert win.tokens == 3000 and not win.verified


def test_cold_ollama_model_is_loaded_once_then_asked_again():
    with FakeServer(Script(num_ctx=None, load_sets=4096)) as s:
        win = w.ensure_window(make_client(), s.base, "story-model")
        assert (win.tokens, win.source, win.verified) == (4096, w.LOADED, True)
        assert s.paths().count("/api/generate") == 1
        assert win.preflight["attempted"] and win.preflight["loaded"]
        assert not win.preflight["verified_before"] and win.preflight["verified_after"]
        load = [b for m, p, b in s.requests if p == "/api/generate"][0]
        assert load == {"model": "story-model"}  # no prompt: nothing is generated
        again = w.ensure_window(make_client(), s.base, "story-model")
        assert again.verified and s.paths().count("/api/generate") == 1


def test_a_verified_window_is_not_reloaded():
    with FakeServer(Script(loaded={"story-model": 8192})) as s:
        win = w.ensure_window(make_client(), s.base, "story-model")
        assert win.verified and "/api/generate" not in s.paths()


def test_reserve_and_effective_budget():
    from engine.context import safety_reserve

    assert [safety_reserve(n) for n in (4096, 8192, 16384)] == [256, 410, 820]
    assert w.effective_budget(16384, w.Window(4096, w.LOADED)) == 4096
    assert w.effective_budget(2048, w.Window(4096, w.LOADED)) == 2048
    assert w.effective_budget(16384, w.Window(None)) == 16384
    assert w.native_base("http://127.0.0.1:11434/v1/") == "http://127.0.0.1:11434"


def test_repo_style_names_are_not_matched_by_their_last_part():
    assert not w.model_matches("someone/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    assert w.model_matches("SmolLM2.gguf", "C:\\models\\SmolLM2.gguf")
