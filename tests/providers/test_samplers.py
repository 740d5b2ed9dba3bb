"""Sampler controls beyond temperature: top-p, min-p, repetition penalty and
stop strings reach the embedded runtime and OpenAI-compatible servers only
when the reader set them, and each turn's record names what was sent."""
from __future__ import annotations

import pytest
from fake_server import FakeServer, Script
from narrators import ScriptedNarrator

from engine import Workbench
from engine.providers import Prompt
from engine.providers.embedded import REPEAT_PENALTY, LocalNarrator
from engine.settings import SAMPLERS, Settings, stop_list


def test_a_prompt_carries_only_the_samplers_set():
    assert Prompt("s", "t").sampling == {}
    chosen = Prompt("s", "t", top_p=0.9, repeat_penalty=1.1, stop=("\n>",)).sampling
    assert chosen == {"top_p": 0.9, "repeat_penalty": 1.1, "stop": ["\n>"]}


def test_stop_strings_are_read_as_a_reader_writes_them():
    assert stop_list(r"\n> | THE END | a\|b |  ") == ["\n>", "THE END", "a|b"]
    assert "at most 4" in " ".join(Settings(stop_strings="a|b|c|d|e").problems())
    assert SAMPLERS == ("top_p", "min_p", "repeat_penalty", "stop_strings")


def _played(tmp_path, **settings):
    narrator = ScriptedNarrator(["The lamp turns."])
    wb = Workbench.open(tmp_path / "samplers.db", background=False)
    wb.configure(narrator=narrator, memory_enabled=False, auto_summarize=False, embedder="none", **settings)
    camp = wb.new_campaign("Lamp", opening="Rain.")
    return camp.act("I wait"), narrator


def test_unset_samplers_are_not_sent_and_the_record_says_so(tmp_path):
    turn, narrator = _played(tmp_path)
    assert narrator.prompts[-1].sampling == {}
    assert turn.accounting["rules"]["sampling"] == {}


def test_set_samplers_reach_the_narrator_and_are_named_in_the_record(tmp_path):
    turn, narrator = _played(tmp_path, top_p=0.9, min_p=0.1, repeat_penalty=1.15, stop_strings=r"\n> | THE END")
    sent = {"top_p": 0.9, "min_p": 0.1, "repeat_penalty": 1.15, "stop": ["\n>", "THE END"]}
    assert narrator.prompts[-1].sampling == sent
    assert turn.accounting["rules"]["sampling"] == sent


def test_a_server_is_sent_only_what_was_set_in_the_names_servers_read(tmp_path):
    with FakeServer(Script(kind="llamacpp")) as server:
        wb = Workbench.open(tmp_path / "srv.db", background=False)
        wb.configure(endpoint=server.base, model="story-model", memory_enabled=False, auto_summarize=False,
                     embedder="none")
        camp = wb.new_campaign("Lamp", opening="Rain.")
        camp.act("I wait")
        plain = [b for m, p, b in server.requests if p.endswith("/chat/completions")][-1]
        assert not {"top_p", "min_p", "repeat_penalty", "repetition_penalty", "stop"} & set(plain)
        wb.configure(top_p=0.8, repeat_penalty=1.2, stop_strings="THE END")
        camp.act("I wait again")
        body = [b for m, p, b in server.requests if p.endswith("/chat/completions")][-1]
        assert body["top_p"] == 0.8 and body["stop"] == ["THE END"] and "min_p" not in body
        assert body["repeat_penalty"] == body["repetition_penalty"] == 1.2


def test_the_embedded_request_keeps_the_measured_defaults_unless_set():
    narrator = LocalNarrator()
    plain = narrator.request(Prompt("s", "t"))
    assert plain["repeat_penalty"] == REPEAT_PENALTY and "top_p" not in plain and "stop" not in plain
    chosen = narrator.request(Prompt("s", "t", top_p=0.7, min_p=0.2, repeat_penalty=1.05, stop=("Mara",)))
    assert (chosen["top_p"], chosen["min_p"], chosen["repeat_penalty"], chosen["stop"]) == (0.7, 0.2, 1.05, ["Mara"])
    memory = narrator.request(Prompt("s", "t", task="memory", top_p=0.7))
    assert "top_p" not in memory and memory["repeat_penalty"] == REPEAT_PENALTY  # the story's samplers only


@pytest.mark.realmodel
def test_the_embedded_model_stops_at_a_stop_string():
    narrator = LocalNarrator(seed=7)
    prompt = Prompt("You narrate a story.", "The lighthouse keeper climbs the stair.", max_tokens=80,
                    temperature=0.8)
    free = "".join(c.text for c in narrator.execute(prompt) if type(c).__name__ == "Text")
    word = next(w for w in free.split() if len(w) > 3 and free.index(w) > 10)
    stopped = "".join(c.text for c in narrator.execute(Prompt(prompt.system, prompt.story, 80, 0.8, stop=(word,)))
                      if type(c).__name__ == "Text")
    assert word not in stopped and free.startswith(stopped.rstrip()[:10])
