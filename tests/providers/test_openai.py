"""The OpenAI-compatible narrator against a real HTTP server on loopback."""
import httpx
import pytest
from fake_server import FakeServer, Script

from engine.errors import NarratorError
from engine.providers import Prompt, Reasoning, Text, Usage
from engine.providers.endpoints import PolicyTransport
from engine.providers.openai import OpenAINarrator

PROMPT = Prompt("You narrate.", "> You open the door.", max_tokens=50, temperature=0.5)


def run(narrator, prompt=PROMPT):
    return list(narrator.execute(prompt))


def test_chat_stream_with_usage_requested_and_reported(fake_server):
    chunks = run(OpenAINarrator(fake_server.base, "story-model"))
    assert "".join(c.text for c in chunks if isinstance(c, Text)) == "The door opens."
    assert chunks[-1] == Usage(120, 3)
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


@pytest.mark.parametrize("status, words", [
    (401, "unauthorized (HTTP 401)"),
    (404, "not found (HTTP 404)"),
    (429, "HTTP 429). Wait a moment"),
    (500, "HTTP 500"),
])
def test_http_failures_become_clear_messages(status, words):
    with FakeServer(Script(fail={"/v1/chat/completions": status})) as server:
        with pytest.raises(NarratorError, match=words.replace("(", r"\(").replace(")", r"\)")):
            run(OpenAINarrator(server.base, "story-model"))


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
    assert seen == ["/v1/chat/completions"]
