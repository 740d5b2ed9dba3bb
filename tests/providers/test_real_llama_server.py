"""Against a real llama.cpp `llama-server`, when this machine has one.

Set STORY_LLAMA_SERVER to the binary (or put `llama-server` on the PATH);
STORY_LLAMA_MODEL to a GGUF file (default: the bundled SmolLM2) and
STORY_LLAMA_ARGS to extra flags (for example `--no-repack` where the AMX
kernels crash). Without a binary every test here is skipped, and says why.
"""
import os
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from engine import TurnFailed, Workbench
from engine.context import ContextOverflow
from engine.providers import window as windows

pytestmark = pytest.mark.realserver

LONG_INPUT = ("walk the length of the flooded quay past the drowned nets, the broken lanterns and the crates "
              "stencilled with the marks of far ports, counting every bollard, every rope and every gull, ") * 2


def _binary() -> str | None:
    return os.environ.get("STORY_LLAMA_SERVER") or shutil.which("llama-server")


def _model() -> Path | None:
    if os.environ.get("STORY_LLAMA_MODEL"):
        return Path(os.environ["STORY_LLAMA_MODEL"])
    try:
        from engine.providers.embedded import model_path

        return model_path()
    except Exception:  # noqa: BLE001 - no bundled model: skipped below
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, ctx: int, port: int):
        args = [_binary(), "-m", str(_model()), "-c", str(ctx), "--host", "127.0.0.1", "--port", str(port),
                "-np", "1", *shlex.split(os.environ.get("STORY_LLAMA_ARGS", ""))]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"llama-server did not become healthy on port {port}: {args}")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def port():
    if not _binary():
        pytest.skip("no llama-server: set STORY_LLAMA_SERVER to its path or put it on the PATH")
    if not _model() or not _model().exists():
        pytest.skip("no GGUF model: set STORY_LLAMA_MODEL, or install the 'local' extra for SmolLM2")
    return _free_port()


@pytest.fixture
def bench(tmp_path):
    windows.cache_clear()

    def make(base, **settings):
        wb = Workbench.open(tmp_path / "real.db", background=False)
        wb.configure(endpoint=base, model=_model().name, embedder="none", memory_enabled=False,
                     auto_summarize=False, max_output_tokens=64, **settings)
        return wb

    return make


def test_discovery_streaming_and_accounting(port, bench):
    server = LlamaServer(2048, port)
    try:
        wb = bench(server.base)
        report = wb.test_connection()
        assert report.ok and report.model_found, report  # found by the GGUF file name
        assert report.window["tokens"] == 2048 and report.window["source"] == "props"
        prefix = _model().name.split(".")[0]  # "SmolLM2-135M-Instruct" for SmolLM2-135M-Instruct.Q4_1.gguf
        if prefix != _model().name:
            wb.configure(model=prefix)
            by_prefix = wb.test_connection()
            assert by_prefix.ok and by_prefix.model_found, by_prefix  # the one served file it begins
            wb.configure(model=_model().name)
        pieces = []
        turn = wb.new_campaign("Quay", opening="The bells have not rung.").act("open the door", on_text=pieces.append)
        assert len(pieces) > 1 and turn.text
        assert turn.usage["prompt_tokens"] and turn.accounting["status"] == "fits"
        assert turn.usage["processed_tokens"] is not None and turn.usage["prompt_ms"] is not None
        assert turn.report["window"]["token_ratio"] >= 1.0 and "/tokenize" in turn.report["window"]["ratio_detail"]
    finally:
        server.stop()


def _act_retrying(camp, text: str, attempts: int = 3):
    """A 135M model sometimes answers with nothing but protocol; the engine
    refuses that unwritten, and a reader presses Retry."""
    for attempt in range(attempts):
        try:
            return camp.act(text)
        except TurnFailed:
            if attempt == attempts - 1:
                raise


def _window_that_cannot_fit(report) -> int:
    """The largest window a llama-server can have (it pads its context to 256
    tokens) in which the protected prompt measured in `report` leaves no room.

    The reply's reserve and the 256-token safety reserve come off the window
    first, and the server counts `token_ratio` of its tokens for each of
    ours, so the prompt fits only above reply + 256 + prompt x ratio. A fixed
    window was a guess: the engine, told of a restart at 1,024, rebuilt this
    campaign's prompt to 660 tokens, which fitted."""
    t, ratio = report["tokens"], report["window"].get("token_ratio") or 1.0
    edge = t["output_reserve"] + 256 + int((t["protected"] + t["transport"]) * ratio)
    return edge // 256 * 256


def test_a_full_window_never_overflows_and_a_restart_is_seen(port, bench):
    server = LlamaServer(1536, port)
    try:
        wb = bench(server.base, trim_fraction=0)
        camp = wb.new_campaign("Quay", opening="The bells have not rung.")
        turns = [_act_retrying(camp, LONG_INPUT) for _ in range(20)]
        assert [t.accounting["status"] for t in turns].count("exceeded") == 0
        assert max(t.usage["prompt_tokens"] for t in turns) > 1100  # the window was filled
        small = _window_that_cannot_fit(camp.context(LONG_INPUT))
        assert 256 <= small < 1280, small
    finally:
        server.stop()
    server = LlamaServer(small, port)
    try:
        # In a window too small for this campaign's protected prompt (rules,
        # protocol, the input, the reply's and the safety reserve) the turn is
        # refused in words that name the server's window, and nothing is written.
        head = camp.head
        with pytest.raises(ContextOverflow, match="what the server was found to accept"):
            camp.act(LONG_INPUT)
        assert camp.head == head
    finally:
        server.stop()
    server = LlamaServer(1280, port)
    try:
        # The restart is seen by the first question asked after it. A turn's
        # own report says it only on its first attempt, and a 135M model may
        # answer that attempt with nothing (a retry then finds the window
        # already learned), so the connection test is the one that asks.
        seen = wb.test_connection()
        assert seen.window["tokens"] == 1280 and seen.window["changed_from"] in (small, 1536), seen.window
        assert "The window changed" in seen.warning
        turn = _act_retrying(camp, LONG_INPUT)
        assert turn.report["budget"]["effective"] == 1280 and turn.accounting["status"] != "exceeded"
    finally:
        server.stop()
