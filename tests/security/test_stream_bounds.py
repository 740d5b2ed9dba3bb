"""A turn is bounded, whatever the server sends: an endless stream is cut at
the reply limit, a drip is cut by the wall clock, Stop works while the server
is silent, and no answer (a huge line, a gzip bomb) can fill the memory."""
import threading
import time
import tracemalloc

import pytest
from fake_server import FakeServer, Script, gzip_bomb

from engine import Workbench
from engine.context import tokens
from engine.errors import NarratorError, TurnCancelled
from engine.providers import Prompt, Text
from engine.providers import window as windows
from engine.providers.http import MAX_BODY, make_client, read_json
from engine.providers.openai import MAX_LINE, OpenAINarrator, reply_limit

PROMPT = Prompt("You narrate.", "> You open the door.", max_tokens=50)


@pytest.fixture(autouse=True)
def fresh_windows():
    windows.cache_clear()
    yield
    windows.cache_clear()


class Peak:
    """The most Python memory allocated at once inside the block, in MB (tracemalloc)."""

    def __enter__(self):
        tracemalloc.start()
        return self

    def __exit__(self, *exc):
        self.mb = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()


def story(chunks) -> str:
    return "".join(c.text for c in chunks if isinstance(c, Text))


def test_an_endless_stream_is_cut_at_the_reply_limit():
    with FakeServer(Script(endless=True)) as server:
        started = time.monotonic()
        text = story(OpenAINarrator(server.base, "story-model").execute(PROMPT))
    assert time.monotonic() - started < 5
    assert 50 <= tokens.count(text) <= reply_limit(50)


def test_an_endless_stream_through_a_turn_stores_a_bounded_narration(db_path):
    with FakeServer(Script(endless=True, loaded={"story-model": 4096})) as server:
        wb = Workbench.open(db_path, background=False)
        wb.configure(endpoint=server.base, model="story-model", embedder="none", max_output_tokens=100,
                     memory_enabled=False, auto_summarize=False)
        turn = wb.new_campaign("Quay", opening="Start.").act("open the door")
    assert tokens.count(turn.text) <= reply_limit(100)


def test_a_server_that_drips_forever_is_cut_by_the_wall_clock():
    with FakeServer(Script(stream_delay=5)) as server:
        narrator = OpenAINarrator(server.base, "story-model", wall_clock=1.0)
        started = time.monotonic()
        with pytest.raises(NarratorError, match="still sending after 1 s"):
            list(narrator.execute(PROMPT))
    assert time.monotonic() - started < 2.5


def test_the_wall_clock_follows_the_timeout():
    assert OpenAINarrator("http://127.0.0.1:1/v1", "m", timeout=60).wall_clock == 240


def test_stop_takes_effect_within_a_second_while_the_server_is_silent(db_path):
    with FakeServer(Script(stream_delay=20, loaded={"story-model": 4096})) as server:
        wb = Workbench.open(db_path, background=False)
        wb.configure(endpoint=server.base, model="story-model", embedder="none", memory_enabled=False,
                     auto_summarize=False)
        camp = wb.new_campaign("Quay", opening="Start.")
        outcome = {}

        def play():
            try:
                camp.act("open the door")
            except Exception as exc:  # noqa: BLE001 - inspected below
                outcome["error"] = exc
            outcome["ended"] = time.monotonic()

        player = threading.Thread(target=play)
        player.start()
        while not server.paths() or server.paths()[-1] != "/v1/chat/completions":
            time.sleep(0.05)
        time.sleep(0.5)  # the server is now silent, reading the "prompt"
        stopped = time.monotonic()
        camp.stop()
        player.join(5)
    assert isinstance(outcome.get("error"), TurnCancelled) and str(outcome["error"]).startswith("Stopped")
    assert outcome["ended"] - stopped < 1.0
    assert camp.history()[-1].text == "Start."


def test_a_line_without_end_is_refused_in_bounded_memory():
    with FakeServer(Script(huge_line=64 * 1024 * 1024)) as server, Peak() as peak, \
            pytest.raises(NarratorError, match=f"longer than {MAX_LINE // 1024:,} KB"):
        list(OpenAINarrator(server.base, "story-model").execute(PROMPT))
    assert peak.mb < 16  # the line is 64 MB; reading stops past 1 MB


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/ps"])
def test_a_gzip_bomb_is_refused_in_bounded_memory(path):
    gzip_bomb(1 << 30)  # built before measuring: about 1 MB that unpacks to 1 GB
    with FakeServer(Script(bomb={path: 1 << 30}, loaded={"story-model": 4096})) as server, Peak() as peak:
        if path == "/api/ps":
            with pytest.raises(Exception, match="more than"):
                read_json(make_client(), "GET", f"{server.native}/api/ps")
            window = windows.probe(make_client(), server.base, "story-model")
            assert window.tokens is None and "refused" in window.detail
        else:
            with pytest.raises(NarratorError, match="more than|longer than"):
                list(OpenAINarrator(server.base, "story-model").execute(PROMPT))
    assert peak.mb < 8  # the 1 GB it unpacks to never exists (measured 2.4 MB and 4.4 MB)


def test_stop_during_a_stream_closes_the_connection_so_the_server_stops_generating():
    with FakeServer(Script(endless=True, loaded={"story-model": 4096})) as server:
        narrator = OpenAINarrator(server.base, "story-model")
        chunks = narrator.execute(Prompt("s", "t", max_tokens=10_000))
        next(chunks)
        chunks.close()  # what the turn does on Stop
        deadline = time.monotonic() + 2
        while not server.served and time.monotonic() < deadline:
            time.sleep(0.05)
    assert server.served == [{"client_left": True}]


def test_any_answer_is_bounded_after_decompression():
    with FakeServer(Script(bomb={"/v1/models": 64 * 1024 * 1024})) as server:
        with pytest.raises(Exception, match=f"more than {MAX_BODY // 1024:,} KB"):
            make_client().get(f"{server.base}/models")


def test_a_line_dripped_in_tiny_pieces_is_read_in_linear_time():
    from engine.providers.openai import _lines

    drip = [b"x"] * 200_000 + [b"\ndata: [DONE]\n"]
    started = time.monotonic()
    lines = list(_lines(iter(drip)))
    assert lines == [b"x" * 200_000, b"data: [DONE]"] and time.monotonic() - started < 1.0
