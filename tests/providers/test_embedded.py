"""The real embedded narrator, offline: SmolLM2-135M through llama-cpp-python,
in its own worker process."""
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine import Workbench
from engine.errors import NarratorUnavailable, TurnCancelled, TurnFailed
from engine.narrative import ends_at_sentence
from engine.providers import Prompt, Status, Text, Usage
from engine.providers.embedded import DEFAULT_N_CTX, LocalNarrator, model_path, unportable_features
from engine.providers.embedders import LlamaEmbedder
from engine.store import NodeRow, TurnRecordRow

pytestmark = pytest.mark.realmodel
ROOT = Path(__file__).resolve().parents[2]


def _rows(wb) -> tuple[int, int]:
    with wb.db.reading() as s:
        return s.query(NodeRow).count(), s.query(TurnRecordRow).count()


def test_the_model_ships_inside_the_wheel():
    path = model_path()
    assert path.name.endswith(".gguf") and path.stat().st_size > 50_000_000


def test_it_streams_text_and_reports_usage_window_and_cache_figures():
    narrator = LocalNarrator()
    window = narrator.context_window()
    assert window.tokens == DEFAULT_N_CTX and window.verified and window.source == "embedded"
    prompt = Prompt("You narrate a story set in a quiet forest with old oaks and a river.",
                    "You stand in a forest.", max_tokens=24)
    chunks = list(narrator.execute(prompt))
    texts = [c for c in chunks if isinstance(c, Text)]
    usage = chunks[-1]
    assert isinstance(usage, Usage) and texts
    assert usage.completion_tokens == len(texts) <= 24
    assert 10 < usage.prompt_tokens < 200
    assert usage.cached_tokens + usage.processed_tokens == usage.prompt_tokens
    assert usage.prompt_ms > 0 and usage.generation_ms >= 0
    # The same system block again: the worker's KV cache serves the shared prefix.
    again = list(narrator.execute(Prompt(prompt.system, "You walk to the river.", max_tokens=8)))[-1]
    assert again.cached_tokens >= 15, again
    assert again.processed_tokens < again.prompt_tokens


def test_the_reader_is_told_what_the_model_is_doing_before_the_first_word():
    narrator = LocalNarrator()
    narrator.worker.close()  # a cold start, as in a fresh kernel
    chunks = list(narrator.execute(Prompt("You narrate.", "A door creaks.", max_tokens=8)))
    first_text = next(i for i, c in enumerate(chunks) if isinstance(c, Text))
    said = [c.text for c in chunks[:first_text] if isinstance(c, Status)]
    assert any(s.startswith("Loading the model SmolLM2") for s in said), said
    assert any("prompt tokens" in s for s in said), said


def test_two_turns_through_the_workbench(tmp_path):
    wb = Workbench.open(tmp_path / "real.db", background=False)
    wb.configure(narrator="local", max_output_tokens=48)
    camp = wb.new_campaign("Harbour", premise="A fishing town at dusk.", protagonist="Ines",
                           opening="The harbour bell rings twice.")
    streamed, statuses = [], []
    first = camp.act("I walk down to the docks", on_text=streamed.append, on_status=statuses.append)
    second = camp.continue_story()
    assert statuses and first.text and second.text
    # What streamed is the model's own reply, kept whole as the node's raw text; the stored text is that
    # reply held to the narration rules (cut back to a whole sentence, or marked as trailing off).
    with wb.db.reading() as s:
        raw = s.get(NodeRow, first.id).raw_text
    assert raw.strip() == "".join(streamed).strip()
    assert ends_at_sentence(first.text) or first.text.endswith("…")
    assert [e.kind for e in camp.history()] == ["start", "player", "narrator", "narrator"]
    assert first.usage["completion_tokens"] <= 48 and first.usage["prompt_tokens"] > 0
    assert first.narrator == "smollm2-135m-instruct-q4_1"
    assert first.window["tokens"] == DEFAULT_N_CTX and first.window["verified"]
    assert first.accounting["status"] in ("fits", "truncation_suspected", "exceeded")
    assert first.accounting["server_prompt_tokens"] == first.usage["prompt_tokens"]
    # The second turn shares the system block and the story so far with the first.
    assert second.usage["cached_tokens"] > 0
    # SmolLM2's tokenizer counts more than cl100k; the model's own counts taught
    # the builder that, and the file keeps it for the next session.
    learned = wb.narrator.context_window()
    assert 1.0 < learned.token_ratio < 1.5 and "its own tokenizer, 2 prompts" in learned.ratio_detail
    wb.close()
    again = Workbench.open(tmp_path / "real.db")
    assert again.narrator.peek_window().token_ratio == learned.token_ratio
    assert [e.text for e in again.campaign(camp.id).history()][-1] == second.text


def test_a_model_crash_mid_stream_fails_the_turn_and_nothing_else(tmp_path):
    """The worker is killed as a native fault would kill it, after its first
    words: the turn fails in words, nothing is written, this process and the
    open workbench go on, and the next turn starts the model again."""
    wb = Workbench.open(tmp_path / "crash.db", background=False)
    wb.configure(narrator="local", max_output_tokens=64)
    camp = wb.new_campaign("Mill", premise="A mill by a river.", protagonist="Tam")
    camp.act("I knock on the mill door")
    story, rows = [(e.kind, e.text) for e in camp.history()], _rows(wb)
    worker = wb.narrator.worker
    killed = []

    def crash(_text):
        if not killed:
            killed.append(worker._process.pid)
            worker.kill()

    with pytest.raises(TurnFailed) as failure:
        camp.act("I step inside", on_text=crash)
    message = str(failure.value)
    assert "embedded model crashed" in message and "SIGKILL" in message and "nothing was written" in message
    assert [(e.kind, e.text) for e in camp.history()] == story and _rows(wb) == rows
    assert not camp.busy
    after = camp.act("I step inside")  # a new worker, a whole turn
    assert after.text and worker._process.pid != killed[0]
    assert [e.kind for e in camp.history()][-2:] == ["player", "narrator"]


def test_stop_during_a_narration_writes_nothing_and_the_model_serves_the_next_turn(tmp_path):
    wb = Workbench.open(tmp_path / "stop.db", background=False)
    wb.configure(narrator="local", max_output_tokens=120)
    camp = wb.new_campaign("Ferry", premise="A night ferry.", protagonist="Ola")
    rows = _rows(wb)
    stopped = threading.Event()

    def stop(_text):
        if not stopped.is_set():
            stopped.set()
            camp.stop()

    with pytest.raises(TurnCancelled, match="Stopped"):
        camp.continue_story(on_text=stop)
    assert _rows(wb) == rows
    assert camp.continue_story().text


def test_your_own_gguf_file_plays_and_bad_files_are_refused_in_words(tmp_path):
    own = tmp_path / "models" / "my-narrator.gguf"
    own.parent.mkdir()
    shutil.copyfile(model_path(), own)
    wb = Workbench.open(tmp_path / "own.db", background=False)
    with pytest.raises(NarratorUnavailable, match="does not exist"):
        wb.configure(narrator="local", model_path=str(tmp_path / "missing.gguf"))
    text_file = tmp_path / "notes.gguf"
    text_file.write_text("these are my notes")
    with pytest.raises(NarratorUnavailable, match="not a GGUF file"):
        wb.configure(model_path=str(text_file))
    with pytest.raises(NarratorUnavailable, match="is a folder"):
        wb.configure(model_path=str(tmp_path))
    assert wb.settings.model_path == ""  # nothing refused was saved
    wb.configure(narrator="local", model_path=str(own), n_ctx=2048, max_output_tokens=24, context_budget=2048)
    assert wb.narrator.model_id == "gguf:my-narrator.gguf"
    turn = wb.new_campaign("Own", premise="A lighthouse.").continue_story()
    assert turn.text and turn.narrator == "gguf:my-narrator.gguf" and turn.window["tokens"] == 2048


def test_test_connection_reports_whether_the_model_can_generate(tmp_path):
    wb = Workbench.open(tmp_path / "conn.db")
    report = wb.test_connection()
    assert report.ok and report.reachable and report.window["tokens"] == DEFAULT_N_CTX
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)  # the magic, then nothing llama.cpp can read
    wb.configure(model_path=str(broken))
    report = wb.test_connection()
    assert not report.ok and "could not be loaded" in report.detail


def test_the_gguf_embedder_runs_out_of_process_and_survives_a_crash():
    embedder = LlamaEmbedder()
    vectors = embedder.embed(["a lantern in the fog", "the harbour at dawn"])
    assert vectors.shape[0] == 2 and vectors.shape[1] > 100
    from engine.errors import NarratorError
    from engine.providers.embedded import shared_worker
    from engine.providers.worker import ModelSpec

    worker = shared_worker(ModelSpec(embedder.path, embedder.n_ctx, embedding=True))
    worker.kill()
    with pytest.raises(NarratorError, match="crashed"):
        embedder.embed(["once more"])
    assert embedder.embed(["once more"]).shape[0] == 1


def test_the_setup_smoke_check_passes_here():
    done = subprocess.run([sys.executable, "-m", "engine.providers.smoke"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "generated a token" in done.stdout


# What llama.cpp's system info said of the two builds measured for the README.
PORTABLE_INFO = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
NATIVE_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
               "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")


def test_a_build_tuned_to_its_cpu_is_told_from_the_portable_one():
    assert unportable_features(PORTABLE_INFO) == []
    assert unportable_features(NATIVE_INFO) == ["AVX512", "AVX512_BF16", "AVX512_VBMI", "AVX512_VNNI", "AVX_VNNI",
                                                "OPENMP"]


def test_the_installed_build_is_the_portable_one():
    narrator = LocalNarrator()
    assert narrator.check()[0]
    info = narrator.worker.info["system_info"]
    assert "AVX2 = 1" in info and unportable_features(info) == [], info


def test_the_model_writes_on_from_an_opening_read_after_the_same_prompt():
    """The opening is read after exactly the prompt the chat path sends (so the
    story's cache serves it), and the reply is the model's words after it."""
    narrator = LocalNarrator()
    system = "You narrate a story in the second person, present tense."
    story = "You stand in a cold cellar below the harbour.\n\n> You light the lantern."
    plain = list(narrator.execute(Prompt(system, story, max_tokens=8)))[-1]
    chunks = list(narrator.execute(Prompt(system, story, max_tokens=24, opening="You light the lantern.")))
    opened = chunks[-1]
    # The chat prompt is a prefix of the opened one: all of it came from the cache.
    assert opened.cached_tokens >= plain.prompt_tokens - 1
    assert plain.prompt_tokens + 4 <= opened.prompt_tokens <= plain.prompt_tokens + 12
    # The opening reads like a whole reply; the model may not end its turn straight after it.
    from engine.providers.worker import OPENING_MIN_TOKENS

    assert "".join(c.text for c in chunks if isinstance(c, Text)).strip()
    assert OPENING_MIN_TOKENS <= opened.completion_tokens <= 24


def test_an_opening_is_text_even_when_it_spells_a_control_token():
    import llama_cpp

    from engine.providers.worker import opened_prompt

    llama = llama_cpp.Llama(str(model_path()), n_ctx=512, verbose=False)
    end = llama.tokenize(b"<|im_end|>", add_bos=False, special=True)
    assert len(end) == 1  # the control token itself
    messages = [{"role": "system", "content": "Narrate."}, {"role": "user", "content": "A door."}]
    tokens, _, _ = opened_prompt(llama, messages, 'You say "<|im_end|>"')
    head, _, _ = opened_prompt(llama, messages, "You")
    assert tokens[:len(head) - 1] == head[:-1]  # the same rendered prompt before the opening
    assert tokens.count(end[0]) == head.count(end[0]) == 2  # the system's and the user's turn ends only
    assert opened_prompt(llama, messages, "") is None


def test_a_steered_reply_names_the_word_and_is_left_alone_after_it():
    """The steer favours a named thing's tokens until the reply has written it
    once; then the model's own sampling goes on, untouched. "giraffe" has no
    business in a harbour cellar: unsteered, the same seed never writes it."""
    system = "You narrate a story in the second person, present tense."
    story = "You stand in a cold cellar below the harbour.\n\n> You look around."
    prompt = Prompt(system, story, max_tokens=60, steer=("giraffe",))
    plain = "".join(c.text for c in LocalNarrator(seed=7, steer_bias=0.0).execute(prompt) if isinstance(c, Text))
    steered = "".join(c.text for c in LocalNarrator(seed=7, steer_bias=20.0).execute(prompt) if isinstance(c, Text))
    assert "giraffe" not in plain.lower()
    # A bias this large writes the word at once; held on after it, every other word would be one.
    assert steered.lower().count("giraffe") == 1, steered


def test_steer_sequences_are_a_words_spellings_that_begin_with_more_than_a_scrap():
    import llama_cpp

    from engine.providers.worker import steer_sequences

    llama = llama_cpp.Llama(str(model_path()), n_ctx=256, verbose=False)
    spelled = {(spaced, tuple(llama.detokenize([t]).decode() for t in s))
               for spaced, s in steer_sequences(llama, ["lantern", "oar"])}
    # SmolLM2 spells "Lantern" at a line's start "L"+"an"+"tern", and " oar" " o"+"ar":
    # scraps that begin too many words to favour.
    assert spelled == {(True, (" lantern",)), (False, ("lan", "tern")), (True, (" Lan", "tern"))}


def _four_grams(text: str) -> set:
    words = text.lower().replace(".", " ").split()
    return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}


def test_dry_keeps_the_narration_from_copying_the_story_it_was_shown():
    """A chain only sees the tokens it drew, so the repeat penalty alone lets
    the model copy the story back; DRY is shown the prompt. Greedy, with a
    steer word (its Python processor shares the chain) and the same seed."""
    system = "You narrate a story in the second person, present tense."
    story = "The old keeper climbs the stairs of the lighthouse and lights the great lamp at the top. " * 4
    story += "\n\n> You watch the keeper."
    prompt = Prompt(system, story, max_tokens=48, temperature=0.0, opening="The old keeper", steer=("gull",))
    copied = {}
    for dry in (0.0, 0.8):
        text = "".join(c.text for c in LocalNarrator(seed=3, dry_multiplier=dry).execute(prompt)
                       if isinstance(c, Text))
        grams = _four_grams(text)
        assert grams, text
        copied[dry] = len(grams & _four_grams(story)) / len(grams)
    assert copied[0.0] >= 0.2, copied  # the plain chain writes the story's sentence back
    assert copied[0.8] <= copied[0.0] / 2, copied


def test_only_narration_is_sampled_with_dry_opening_and_steer():
    """Memories and summaries should repeat the story's words: they go plain."""
    narrator = LocalNarrator(dry_multiplier=0.8, steer_bias=4.0)
    story = narrator.request(Prompt("Narrate.", "A door.", opening="You open", steer=("door",)))
    memory = narrator.request(Prompt("Remember.", "A door.", task="memory", opening="You open", steer=("door",)))
    assert (story["dry_multiplier"], story["opening"], story["steer"], story["slot"]) == (0.8, "You open", ["door"],
                                                                                       "story")
    assert (memory["dry_multiplier"], memory["opening"], memory["steer"], memory["slot"]) == (0.0, "", [], "memory")


def test_dry_joins_the_sampler_chain_after_the_penalties_and_before_the_draw():
    """Placed after the draw it would do nothing; before the repeat penalty
    it would be undone by nothing, but top-k would already have cut. The
    chain holds a Python processor (the steer's), whose sampler has no name."""
    import llama_cpp

    from engine.providers.worker import reusing_llama_class

    llama = reusing_llama_class()(model_path=str(model_path()), n_ctx=256, verbose=False)
    llama._prompt = llama.tokenize(b"The keeper climbs the stairs. The keeper climbs")
    llama.dry = {"multiplier": 0.8, "last_n": 256}
    sampler = llama._init_sampler(temp=0.8, repeat_penalty=1.3,
                                  logits_processor=llama_cpp.LogitsProcessorList([lambda ids, s: s]))
    chain = sampler.sampler
    names = [llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i)).decode().lstrip("?")
             for i in range(1, llama_cpp.llama_sampler_chain_n(chain))]  # "?": a sampler that does nothing here
    assert names == ["penalties", "dry", "top-k", "typical", "top-p", "min-p", "temp", "dist"], names
    llama.dry = None
    plain = llama._init_sampler(temp=0.8, repeat_penalty=1.3)
    assert llama_cpp.llama_sampler_chain_n(plain.sampler) == len(names) - 1
