"""The real embedded narrator, offline: SmolLM2-135M through llama-cpp-python."""
import pytest

from engine import Workbench
from engine.providers import Prompt, Text, Usage
from engine.providers.embedded import DEFAULT_N_CTX, LocalNarrator, model_path

pytestmark = pytest.mark.realmodel


def test_the_model_ships_inside_the_wheel():
    path = model_path()
    assert path.name.endswith(".gguf") and path.stat().st_size > 50_000_000


def test_it_streams_text_and_reports_usage_and_its_window():
    narrator = LocalNarrator()
    window = narrator.context_window()
    assert window.tokens == DEFAULT_N_CTX and window.verified and window.source == "embedded"
    chunks = list(narrator.execute(Prompt("You narrate a story.", "You stand in a forest.", max_tokens=24)))
    texts = [c for c in chunks if isinstance(c, Text)]
    usage = chunks[-1]
    assert isinstance(usage, Usage) and texts
    assert usage.completion_tokens == len(texts) <= 24
    assert 10 < usage.prompt_tokens < 200


def test_two_turns_through_the_workbench(tmp_path):
    wb = Workbench.open(tmp_path / "real.db", background=False)
    wb.configure(narrator="local", max_output_tokens=48)
    camp = wb.new_campaign("Harbour", premise="A fishing town at dusk.", protagonist="Ines",
                           opening="The harbour bell rings twice.")
    streamed = []
    first = camp.act("I walk down to the docks", on_text=streamed.append)
    second = camp.continue_story()
    assert first.text and second.text and first.text == "".join(streamed).strip()
    assert [e.kind for e in camp.history()] == ["start", "player", "narrator", "narrator"]
    assert first.usage["completion_tokens"] <= 48 and first.usage["prompt_tokens"] > 0
    assert first.narrator == LocalNarrator.model_id
    assert first.window["tokens"] == DEFAULT_N_CTX and first.window["verified"]
    assert first.accounting["status"] in ("fits", "truncation_suspected", "exceeded")
    assert first.accounting["server_prompt_tokens"] == first.usage["prompt_tokens"]
    # Reopen: the story is in the file.
    wb.close()
    again = Workbench.open(tmp_path / "real.db")
    assert [e.text for e in again.campaign(camp.id).history()][-1] == second.text
