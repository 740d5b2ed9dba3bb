"""The OpenAI-compatible narrator against a real HTTP server on loopback."""
import httpx
import pytest
from fake_server import FakeServer, Script

from engine.errors import NarratorError
from engine.providers import Prompt, Reasoning, Text, Usage
from engine.providers.http import PolicyTransport
from engine.providers.openai import OpenAINarrator

PROMPT = Prompt("You narrate.", "> You open the door.", max_tokens=50, temperature=0.5)


def run(narrator, prompt=PROMPT):
    return list(narrator.execute(prompt))


def test_chat_stream_with_usage_requested_and_reported(fake_server):
    chunks = run(OpenAINarrator(fake_server.base, "story-model"))
    assert "".join(c.text for c in chunks if isinstance(c, Text)) == "The door opens."
    assert chunks[-1] == Usage(120, 3, processed_tokens=None)
    method, path, body = fake_server.requests[-1]
    assert path == "/v1/chat/completions" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 50 and body["temperature"] == 0.5
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"].startswith("> You open the door.")


def test_completion_mode_flattens_roles_into_a_transcript(fake_server):
    chunks = run(OpenAINarrator(fake_server.base, "story-model", api_mode="completion"))
    assert "".join(c.text for c in chunks if isinstance(c, Text)) == "The door opens."
    _, path, body = fake_server.requests[-1]
    assert path == "/v1/completions" and "messages" not in body
    assert body["prompt"].startswith("System: You narrate.") and body["prompt"].endswith("Assistant:")


def test_reasoning_is_kept_apart_from_prose():
    with FakeServer(Script(reasoning=["Consider ", "the door."])) as server:
        chunks = run(OpenAINarrator(server.base, "story-model"))
    assert "".join(c.text for c in chunks if isinstance(c, Reasoning)) == "Consider the door."
    assert "Consider" not in "".join(c.text for c in chunks if isinstance(c, Text))


def test_a_server_that_sends_no_usage_gives_unknown_usage():
    with FakeServer(Script(usage=None)) as server:
        assert run(OpenAINarrator(server.base, "story-model"))[-1] == Usage(None, None)


@pytest.mark.parametrize("style", ["llamacpp", "ollama", "vllm", "text"])
@pytest.mark.parametrize("status, advice", [
    (400, "malformed"),
    (401, "unauthorized"),
    (404, "not found"),
    (413, "larger than the server accepts"),
    (429, "Wait a moment"),
    (500, "its own log says more"),
    (503, "still loading the model"),
])
def test_the_servers_own_error_reaches_the_reader(style, status, advice):
    said = f"slot {status} unavailable: <b>busy</b>"
    script = Script(fail={"/v1/chat/completions": status}, error_style=style, fail_message=said)
    with FakeServer(script) as server, pytest.raises(NarratorError) as caught:
        run(OpenAINarrator(server.base, "story-model"))
    message = str(caught.value)
    assert f"HTTP {status}" in message and advice in message
    assert f"The server said: “slot {status} unavailable: busy”" in message  # markup dropped, words kept


def test_a_prompt_too_long_for_the_window_says_so_and_asks_the_window_again():
    said = "request (3016 tokens) exceeds the available context size (512 tokens), try increasing it"
    script = Script(kind="llamacpp", props_ctx=8192, fail={"/v1/chat/completions": 400}, fail_message=said)
    with FakeServer(script) as server:
        narrator = OpenAINarrator(server.base, "story-model")
        assert narrator.context_window().tokens == 8192
        server.script.props_ctx = 512  # restarted with -c 512 behind our back
        with pytest.raises(NarratorError) as caught:
            run(narrator)
        assert server.paths().count("/props") >= 2
    message = str(caught.value)
    assert said in message and "now reports a 512-token window" in message and "built to 8,192" in message


def test_cache_figures_of_each_server_shape():
    with FakeServer(Script(kind="llamacpp", timings=True, cached=100)) as server:
        llamacpp = run(OpenAINarrator(server.base, "story-model"))[-1]
    assert (llamacpp.prompt_tokens, llamacpp.cached_tokens, llamacpp.processed_tokens) == (120, 100, 20)
    assert (llamacpp.prompt_ms, llamacpp.generation_ms) == (12.5, 40.25)
    with FakeServer(Script(kind="ollama", ollama_figures=True, cached=30, loaded={"story-model": 4096})) as server:
        ollama = run(OpenAINarrator(server.base, "story-model"))[-1]
    assert (ollama.processed_tokens, ollama.cached_tokens, ollama.prompt_ms, ollama.generation_ms) == (90, 30, 30.0, 90.0)
    with FakeServer(Script(kind="vllm", cached=64)) as server:
        vllm = run(OpenAINarrator(server.base, "story-model"))[-1]
    assert (vllm.cached_tokens, vllm.processed_tokens, vllm.prompt_ms) == (64, 56, None)
    assert set(vllm.as_dict()) == {"prompt_tokens", "completion_tokens", "cached_tokens", "processed_tokens",
                                   "prompt_ms", "generation_ms"}


def test_a_lone_surrogate_from_the_narrator_is_replaced_visibly():
    with FakeServer(Script(reply=["The door \ud800", "opens."])) as server:
        text = "".join(c.text for c in run(OpenAINarrator(server.base, "story-model")) if isinstance(c, Text))
    assert text == "The door \ufffdopens." and text.encode("utf-8")


def test_unknown_model_says_which_model(fake_server):
    with pytest.raises(NarratorError, match="model 'nope' exists"):
        run(OpenAINarrator(fake_server.base, "nope"))


def test_nothing_listening_says_to_start_the_server():
    with FakeServer() as server:
        base = server.base
    with pytest.raises(NarratorError, match="Could not connect .* Is the server running"):
        run(OpenAINarrator(base, "story-model"))


def test_a_slow_server_times_out_in_words():
    with FakeServer(Script(delay=1.0)) as server:
        client = httpx.Client(transport=PolicyTransport(), timeout=0.2)
        with pytest.raises(NarratorError, match="did not answer within"):
            run(OpenAINarrator(server.base, "story-model", client=client))


def test_a_stream_cut_mid_line_fails_instead_of_passing_as_story():
    with FakeServer(Script(drop_after=1)) as server, pytest.raises(NarratorError):
        run(OpenAINarrator(server.base, "story-model"))


def test_timeout_is_bounded_to_30_3600():
    assert OpenAINarrator("http://127.0.0.1:1/v1", "m", timeout=1).timeout == 30
    assert OpenAINarrator("http://127.0.0.1:1/v1", "m", timeout=99999).timeout == 3600


def test_injected_client_is_used(fake_server):
    seen = []

    class Spy(httpx.HTTPTransport):
        def handle_request(self, request):
            seen.append(request.url.path)
            return super().handle_request(request)

    client = httpx.Client(transport=PolicyTransport(Spy()))
    run(OpenAINarrator(fake_server.base, "story-model", client=client))
    assert seen == ["/v1/chat/completions"]  # an Ollama-shaped server: no /tokenize asked before a window


def test_an_error_event_in_the_middle_of_a_stream_is_the_servers_words_not_a_short_story():
    with FakeServer(Script(stream_error="slot 0: KV cache full, decode failed")) as server:
        with pytest.raises(NarratorError, match="The server said: “slot 0: KV cache full, decode failed”"):
            run(OpenAINarrator(server.base, "story-model"))


@pytest.mark.parametrize("api_mode", ["chat", "completion"])
def test_a_server_that_answers_whole_instead_of_streaming_is_still_read(api_mode):
    with FakeServer(Script(whole=True)) as server:
        chunks = run(OpenAINarrator(server.base, "story-model", api_mode=api_mode))
    assert "".join(c.text for c in chunks if isinstance(c, Text)) == "The door opens."
    assert chunks[-1].prompt_tokens == 120


# ------------------------------------------------------------------ redirects
class _Redirecting:
    """A loopback server that answers every request with one redirect status,
    pointing at `target`; `hits` counts what it was asked."""

    def __init__(self, status: int, target: str | None):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        owner = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                owner.hits.append(self.path)
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                self.send_response(status)
                if target is not None:
                    self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_is_reported_with_where_it_pointed_and_never_followed(status, tmp_path):
    """A redirecting server used to give "The narrator returned no story
    text". Now the turn says it was a redirect, where to, and why it is not
    followed; the address it names receives nothing."""
    from engine import TurnFailed, Workbench

    with FakeServer() as elsewhere, _Redirecting(status, f"{elsewhere.base}/chat/completions") as server:
        with pytest.raises(NarratorError) as refused:
            run(OpenAINarrator(server.base, "story-model"))
        message = str(refused.value)
        assert f"HTTP {status}" in message and "redirect" in message
        assert f"{elsewhere.base}/chat/completions" in message and "does not follow redirects" in message
        wb = Workbench.open(tmp_path / "redirect.db", background=False)
        wb.configure(endpoint=server.base, model="story-model", embedder="none")
        report = wb.test_connection()
        assert not report.reachable and f"HTTP {status}" in report.detail and elsewhere.base in report.detail
        camp = wb.new_campaign("Quay", opening="The bells have not rung.")
        with pytest.raises(TurnFailed, match="redirect"):
            camp.act("open the door")
        assert [n.kind for n in camp.history()] == ["start"]  # nothing written
        wb.close()
        assert server.hits and elsewhere.requests == []


def test_a_redirect_without_a_location_says_so():
    with _Redirecting(302, None) as server, pytest.raises(NarratorError, match="no Location header"):
        run(OpenAINarrator(server.base, "story-model"))


def test_a_relative_redirect_is_shown_as_the_address_it_means():
    with _Redirecting(307, "/elsewhere/v1/chat/completions") as server, pytest.raises(NarratorError) as refused:
        run(OpenAINarrator(server.base, "story-model"))
    assert server.base.removesuffix("/v1") + "/elsewhere/v1/chat/completions" in str(refused.value)


# ------------------------------------------------------------------ model names
LLAMA_PATH = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.parametrize("wanted, offered, found, candidates", [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", [LLAMA_PATH], LLAMA_PATH, []),       # the file name
    ("SmolLM2-135M-Instruct.Q4_1", [LLAMA_PATH], LLAMA_PATH, []),            # its stem
    ("SmolLM2-135M-Instruct", [LLAMA_PATH], LLAMA_PATH, []),                 # a unique prefix, up to a dot
    ("SmolLM2", [LLAMA_PATH], LLAMA_PATH, []),                               # ... or a dash
    ("SmolLM", [LLAMA_PATH], None, []),                                      # not at a boundary
    ("smollm2-135m-instruct", [LLAMA_PATH], None, []),                       # names are case-sensitive
    ("SmolLM2-135M-Instruct", [LLAMA_PATH, "/models/SmolLM2-135M-Instruct.Q8_0.gguf"], None,
     [LLAMA_PATH, "/models/SmolLM2-135M-Instruct.Q8_0.gguf"]),              # ambiguous: both named
    ("SmolLM2-135M-Instruct.Q8_0", [LLAMA_PATH, "/models/SmolLM2-135M-Instruct.Q8_0.gguf"],
     "/models/SmolLM2-135M-Instruct.Q8_0.gguf", []),                        # an exact stem wins
    ("qwen2.5", ["qwen2.5:7b"], None, []),                                   # Ollama tags match exactly
])
def test_a_model_is_found_by_a_unique_prefix_of_its_file_name(wanted, offered, found, candidates):
    from engine.providers.window import find_model

    entry, ambiguous = find_model(wanted, [{"id": o} for o in offered])
    assert (entry["id"] if entry else None) == found and ambiguous == candidates


def test_the_connection_test_finds_a_prefix_and_refuses_an_ambiguous_one(tmp_path):
    from engine import Workbench

    with FakeServer(Script(kind="llamacpp", models=[LLAMA_PATH])) as server:
        wb = Workbench.open(tmp_path / "prefix.db", background=False)
        wb.configure(endpoint=server.base, model="SmolLM2-135M-Instruct", embedder="none")
        report = wb.test_connection()
        assert report.ok and report.model_found and "does not offer" not in (report.warning or "")
        server.script.models = [LLAMA_PATH, "/models/SmolLM2-135M-Instruct.Q8_0.gguf"]
        report = wb.test_connection()
        assert not report.ok and report.model_found is False
        assert "ambiguous" in report.warning and LLAMA_PATH in report.warning and "Q8_0.gguf" in report.warning
        wb.close()
