"""Does the narrator keep its own rules? Measured per turn on any narrator.

A fixed script of varied turns (actions, speech, Continue, story
directions), each naming a thing the reply should take up (a lantern, a
storm, a wolf), is played on a fresh campaign. Per turn it records, for the
model's raw reply ("before" the engine's rules) and for the stored text
("after" them: first-person narration repaired, the reply cut to its last
complete sentence): second person, a complete ending, uptake of the named
thing; and across replies, the share of each reply's word 4-grams already
written in an earlier reply. With memory on, each memory the model wrote is
scored for the names, numbers and quoted words of its block it kept, before
and after the memory guard.
"""
from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import TurnFailed, Workbench
from engine.memory.bank import write_due_memories
from engine.narrative import ends_at_sentence, first_person, split
from engine.narrative.prose import takes_up

__all__ = ["SCRIPT", "TUNING", "Step", "copied_share", "dry_ab", "play", "summarise", "memory_quality", "opening_ab",
           "repeated_ngrams", "steer_ab", "takes_ab", "took_up", "plot_turns"]


@dataclass(frozen=True)
class Step:
    mode: str  # act | direct | continue
    text: str
    named: tuple[str, ...]  # the things the reply should take up (any form of each counts)


SCRIPT = (
    Step("act", "light the lantern and hold it up", ("lantern",)),
    Step("act", '"Is anyone down here?"', ()),
    Step("direct", "A storm breaks over the harbour.", ("storm",)),
    Step("act", "search the fisherman's hut for a rope", ("rope", "hut")),
    Step("continue", "", ()),
    Step("direct", "A grey wolf steps out of the trees.", ("wolf",)),
    Step("act", "throw the bread to the wolf", ("bread", "wolf")),
    Step("act", "I climb the bell tower", ("tower", "bell")),
    Step("act", '"Who rang the bell last night?"', ("bell",)),
    Step("direct", "An old woman with a basket of eels arrives.", ("woman", "eels")),
    Step("act", "open the iron chest", ("chest",)),
    Step("continue", "", ()),
    Step("act", "I follow the river to the mill", ("river", "mill")),
    Step("direct", "Snow begins to fall.", ("snow",)),
    Step("act", "read the map by the fire", ("map", "fire")),
    Step("act", "knock on the chapel door", ("chapel", "door")),
    Step("continue", "", ()),
    Step("direct", "A rider in a red cloak gallops past.", ("rider", "cloak")),
    Step("act", "I buy a knife from the pedlar", ("knife", "pedlar")),
    Step("act", "ask the ferryman for passage", ("ferryman", "passage")),
    Step("direct", "The lighthouse lamp goes dark.", ("lamp", "lighthouse")),
    Step("act", "hide the letter in my boot", ("letter", "boot")),
    Step("continue", "", ()),
    Step("act", "ring the bell three times", ("bell",)),
)

# The turns every constant of issue 30 was chosen on (placement, sampling, the
# short protocol rule); SCRIPT is held out and is what the evidence reports.
TUNING = (
    Step("act", "unfold the harbour master's letter", ("letter",)),
    Step("direct", "Fog rolls in from the sea.", ("fog",)),
    Step("act", "walk to the tavern by the docks", ("tavern", "dock")),
    Step("act", '"Have you seen the keeper?"', ("keeper",)),
    Step("direct", "A black cat follows you.", ("cat",)),
    Step("act", "climb the cliff path to the lighthouse", ("cliff", "lighthouse")),
    Step("continue", "", ()),
    Step("act", "pick up the broken oar", ("oar",)),
    Step("direct", "Thunder shakes the windows.", ("thunder", "window")),
    Step("act", "I light a candle in the chapel", ("candle", "chapel")),
    Step("act", "give the coin to the beggar", ("coin", "beggar")),
    Step("act", "pull the boat onto the shingle", ("boat", "shingle")),
)

_WORDS = re.compile(r"[a-z']+")


def _stem(word: str) -> str:
    word = word.removesuffix("'s")  # "the keeper's words" names the keeper
    for suffix in ("ves", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + ("f" if suffix == "ves" else "")
    return word


def took_up(reply: str, named: Sequence[str]) -> bool | None:
    """Whether the reply names any of the input's named things (None when it named none)."""
    if not named:
        return None
    words = {_stem(w) for w in _WORDS.findall(reply.lower())}
    return any(_stem(n.lower()) in words for n in named)


def _grams(text: str, n: int = 4) -> set[tuple[str, ...]]:
    words = _WORDS.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def repeated_ngrams(replies: Sequence[str], n: int = 4) -> list[float]:
    """Per reply, the share of its word n-grams already written in an earlier reply."""
    seen: set = set()
    out = []
    for reply in replies:
        grams = _grams(reply, n)
        out.append(len(grams & seen) / len(grams) if grams else 0.0)
        seen |= grams
    return out


def play(path: str | Path, *, narrator="local", steps: Sequence[Step] = SCRIPT, turns: int | None = None,
         max_output_tokens: int = 200, memory: bool = True, embedder: str = "local", progress: bool = True,
         ask_again: bool = False, prompts: dict | None = None, prompt_memory: bool = False,
         **settings) -> tuple[pd.DataFrame, list[dict]]:
    """Play the script (cycled to `turns`) on a fresh file; one row per turn,
    and the memory log (the model's memory and the kept one, per block).
    `prompts`, when given, receives each turn's last narration prompt by turn
    number (what `opening_ab` asks again).

    `prompt_memory` plays on the workbench's own defaults: the engine writes
    memories and summaries after each turn and recalls them into the prompts.
    Its memories are not scored then (`memory` is ignored: the log is the
    evaluation's own writer's).

    `ask_again` measures a reply rule before the turn runner has it: a reply
    naming none of the things its input named (engine.narrative.takes_up) is
    taken once more with Retry, and the turn's row is the second take."""
    if prompt_memory:
        settings = {"memory_enabled": True, "auto_summarize": True, **settings}
        memory = False
    wb, camp = _campaign(path, narrator=narrator, embedder=embedder, max_output_tokens=max_output_tokens,
                         **settings)
    steps = list(steps) if turns is None else [steps[i % len(steps)] for i in range(turns)]
    rows, log, replies = [], [], []
    current = [0]
    if prompts is not None:
        _record_prompts(wb.narrator, prompts, current)
    for i, step in enumerate(tqdm(steps, desc="narration", disable=not progress)):
        current[0] = i
        try:
            turn = {"act": lambda s=step: camp.act(s.text), "direct": lambda s=step: camp.direct(s.text),
                    "continue": camp.continue_story}[step.mode]()
        except TurnFailed as exc:
            rows.append({"turn": i, "mode": step.mode, "input": step.text, "refused": str(exc)})
            continue
        except Exception as exc:  # noqa: BLE001 - an engine error on one turn is a row, not the end of the run
            rows.append({"turn": i, "mode": step.mode, "input": step.text,
                         "refused": f"{type(exc).__name__}: {str(exc)[:300]}"})
            continue
        again = 0.0
        if ask_again and step.mode != "continue" and takes_up(turn.text, _line(wb, turn.id)) is False:
            started = time.perf_counter()
            turn = camp.retry()
            again = time.perf_counter() - started
        raw = split(_raw(wb, turn.id))
        before = raw.prose.strip()
        after = turn.text
        replies.append(after)
        rules = (turn.accounting or {}).get("rules") or {}
        rows.append({
            "turn": i, "mode": step.mode, "input": step.text, "named": ", ".join(step.named), "refused": "",
            "second_person_before": not first_person(before), "second_person_after": not first_person(after),
            "ends_before": ends_at_sentence(before), "ends_after": ends_at_sentence(after),
            "uptake": took_up(after, step.named), "cut": turn.cut, "tail": turn.tail,
            "repaired": bool(rules.get("first_person_repaired")), "asked": rules.get("asked", 1),
            "words": len(after.split()), "asked_again_s": round(again, 1), "rule_tokens": _rule_tokens(turn),
            "reply": after,
        })
        if memory:
            write_due_memories(wb.db, camp.id, wb.narrator, guard=True, log=log)
    frame = pd.DataFrame(rows)
    if replies and "reply" in frame:
        frame.loc[frame["refused"] == "", "repeated_4grams"] = repeated_ngrams(replies)
    wb.close()
    return frame, log


def _campaign(path: str | Path, **settings):
    """A fresh file and the script's campaign, memory and summaries off unless `settings` say."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    wb = Workbench.open(path, background=False)
    wb.configure(**{"memory_enabled": False, "auto_summarize": False, **settings})
    camp = wb.new_campaign("Gull Harbour", premise="A harbour town on a stormy coast, where a keeper went missing.",
                           protagonist="Wren", opening="Rain drums on the slate roofs of Gull Harbour as you step "
                           "off the coach with a lantern and a letter for the harbour master.")
    return wb, camp


def takes_ab(path: str | Path, *, steps: Sequence[Step] = SCRIPT, takes: Sequence[int] = (1, 3), repeats: int = 3,
             max_output_tokens: int = 200, progress: bool = True) -> pd.DataFrame:
    """The embedded narrator's stored reply with each `uptake_takes` value, on
    the same prompts: after each turn of the script that named something, the
    turn is taken again with Retry (the same input, the same story) `repeats`
    times under each value; one row per take. The story goes on from the last
    take, so every value meets the same prompts."""
    wb, camp = _campaign(path, narrator="local", embedder="local", max_output_tokens=max_output_tokens)
    rows = []
    for i, step in enumerate(tqdm(list(steps), desc="takes A/B", disable=not progress)):
        wb.configure(uptake_takes=1)
        try:
            {"act": lambda s=step: camp.act(s.text), "direct": lambda s=step: camp.direct(s.text),
             "continue": camp.continue_story}[step.mode]()
        except TurnFailed:
            continue
        if not step.named:
            continue
        for value in takes:
            wb.configure(uptake_takes=value)
            for r in range(repeats):
                started = time.perf_counter()
                try:
                    turn = camp.retry()
                except TurnFailed as exc:
                    rows.append({"turn": i, "input": step.text, "takes": value, "repeat": r, "refused": str(exc)})
                    continue
                rules = (turn.accounting or {}).get("rules") or {}
                rows.append({"turn": i, "input": step.text, "takes": value, "repeat": r, "refused": "",
                             "uptake": took_up(turn.text, step.named), "asked": rules.get("asked", 1),
                             "seconds": round(time.perf_counter() - started, 1), "reply": turn.text})
    wb.close()
    return pd.DataFrame(rows)


def _record_prompts(narrator, into: dict, current: list) -> None:
    """Keep the narration prompts the narrator is sent, by turn (the instance's
    own `execute` wrapped: the experiment watches the engine, it does not
    change it)."""
    execute = narrator.execute

    def recording(prompt):
        if prompt.task == "narrate":
            into[current[0]] = prompt
        return execute(prompt)

    narrator.execute = recording


def opening_ab(frame: pd.DataFrame, prompts: dict, *, seeds: Sequence[int] = (1, 2, 3),
               max_output_tokens: int = 120, progress: bool = True) -> pd.DataFrame:
    """The same prompts answered by the embedded narrator with the reply's
    opening (engine.narrative.reply_opening) and without it (the input said
    again last in the prompt only), over `seeds`; one row per reply. Uptake
    counts the model's own words: the opening itself is never part of them.

    Why on fixed prompts: a played campaign's history diverges with every
    reply, so two plays compare two stories; here only the opening differs."""
    variants = {"restated only": (lambda p: {"opening": "", "steer": ()}, {}),
                "opening": (lambda p: {"steer": ()}, {})}
    return _same_prompts(frame, prompts, variants, seeds, max_output_tokens, progress, "opening A/B",
                         only=lambda p: bool(p.opening))


def steer_ab(frame: pd.DataFrame, prompts: dict, *, biases: Sequence[float] = (0.0, 2.0, 4.0, 6.0),
             seeds: Sequence[int] = (1, 2, 3), max_output_tokens: int = 120, progress: bool = True) -> pd.DataFrame:
    """The same prompts (each as the turn runner sent it: opening and steer
    words included, so play with steer_named on) answered by the embedded
    narrator at each steer bias (0: no steer), over `seeds`; one row per reply,
    uptake counted on the model's own words against the script's labels."""
    variants = {f"bias {b:g}": (lambda p: {}, {"steer_bias": b}) for b in biases}
    return _same_prompts(frame, prompts, variants, seeds, max_output_tokens, progress, "steer A/B")


def dry_ab(frame: pd.DataFrame, prompts: dict, *, multipliers: Sequence[float] = (0.0, 0.4, 0.8, 1.6),
           seeds: Sequence[int] = (1, 2, 3), max_output_tokens: int = 120, progress: bool = True) -> pd.DataFrame:
    """The same prompts answered at each DRY multiplier (0: none), everything
    else at the narrator's defaults; besides uptake, each row's
    `copied_4grams` is the share of the reply's word 4-grams that the
    prompt's text already holds (what DRY is there to lower)."""
    variants = {f"dry {m:g}": (lambda p: {}, {"dry_multiplier": m}) for m in multipliers}
    return _same_prompts(frame, prompts, variants, seeds, max_output_tokens, progress, "DRY A/B")


def copied_share(reply: str, shown: str, n: int = 4) -> float:
    """The share of the reply's word n-grams already in the text it was shown."""
    grams = _grams(reply, n)
    return len(grams & _grams(shown, n)) / len(grams) if grams else 0.0


def _same_prompts(frame, prompts, variants: dict, seeds, max_output_tokens, progress, desc, only=None):
    """Each named turn's recorded prompt asked again under each variant (a
    change to the prompt, and the LocalNarrator's keyword arguments) and seed."""
    from dataclasses import replace

    from engine.narrative import split
    from engine.providers import Text
    from engine.providers.embedded import LocalNarrator

    named = {int(r["turn"]): r for r in frame.to_dict("records")
             if isinstance(r.get("named"), str) and r["named"] and int(r["turn"]) in prompts}  # NaN: a refused turn
    jobs = [(t, seed, variant) for t in named if only is None or only(prompts[t])
            for seed in seeds for variant in variants]
    rows = []
    for turn, seed, variant in tqdm(jobs, desc=desc, disable=not progress):
        change, kwargs = variants[variant]
        prompt = replace(prompts[turn], max_tokens=max_output_tokens, **change(prompts[turn]))
        text = "".join(c.text for c in LocalNarrator(seed=seed, **kwargs).execute(prompt) if isinstance(c, Text))
        step = named[turn]
        rows.append({"turn": turn, "mode": step["mode"], "input": step["input"], "seed": seed, "variant": variant,
                     "steer": ", ".join(prompt.steer),
                     "uptake": took_up(split(text).prose, [n.strip() for n in step["named"].split(",")]),
                     "copied_4grams": copied_share(split(text).prose, prompt.user_text), "reply": text})
    return pd.DataFrame(rows)


def _rule_tokens(turn) -> int:
    """What the state-protocol rule cost this turn's prompt (0 when it was not sent)."""
    return sum(s.get("tokens") or 0 for s in turn.report.get("sections", []) if s.get("name") == "emit_rule")


def _line(wb, node_id: int) -> str:
    """The input line the narration at `node_id` answers (its parent's text)."""
    from engine.store import NodeRow

    with wb.db.reading() as s:
        parent = s.get(NodeRow, s.get(NodeRow, node_id).parent_id)
        return parent.text if parent is not None and parent.kind in ("player", "direction") else ""


def _raw(wb, node_id: int) -> str:
    from engine.store import NodeRow

    with wb.db.reading() as s:
        node = s.get(NodeRow, node_id)
        return node.raw_text or node.text


def summarise(frame: pd.DataFrame) -> dict:
    """The rates the issue's targets are set on."""
    played = frame[frame["refused"] == ""]
    named = played[played["uptake"].notna()]
    directions = named[named["mode"] == "direct"]
    return {
        "turns": int(len(frame)), "refused": int((frame["refused"] != "").sum()),
        "second_person_before": float(played["second_person_before"].mean()),
        "second_person_after": float(played["second_person_after"].mean()),
        "ends_before": float(played["ends_before"].mean()), "ends_after": float(played["ends_after"].mean()),
        "uptake": float(named["uptake"].astype(bool).mean()) if len(named) else None,
        "uptake_directions": float(directions["uptake"].astype(bool).mean()) if len(directions) else None,
        "repeated_4grams": float(played["repeated_4grams"].mean()) if "repeated_4grams" in played else None,
        "rule_tokens": int(played["rule_tokens"].max()) if "rule_tokens" in played and len(played) else None,
        "cut": int(played["cut"].sum()), "repaired": int(played["repaired"].sum()),
        "asked_again": int((played["asked"] > 1).sum()),
    }


def memory_quality(log: Sequence[dict]) -> pd.DataFrame:
    """Per memory: the share of its block's salient items (at most six) the
    model's memory kept, and the share the stored memory kept."""
    rows = []
    for entry in log:
        required = entry["required"]
        if not required:
            continue
        rows.append({"start": entry["start"], "accepted": entry["accepted"], "reason": entry["reason"],
                     "model_kept": sum(_held(entry["raw"], i) for i in required) / len(required),
                     "stored_kept": sum(_held(entry["kept"], i) for i in required) / len(required),
                     "raw": entry["raw"], "kept": entry["kept"]})
    return pd.DataFrame(rows)


def _held(text: str, item: str) -> bool:
    return all(part.lower() in text.lower() for part in item.split())


def plot_turns(frame: pd.DataFrame):
    """Per turn: the reply's length (red: cut), whether it took up the input's
    named thing, and its repeated 4-gram share."""
    import matplotlib.pyplot as plt

    played = frame[frame["refused"] == ""]
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 6), sharex=True,
                                              gridspec_kw={"height_ratios": [3, 1, 2]})
    top.bar(played["turn"], played["words"], color=["#c44" if c else "#48c" for c in played["cut"]])
    top.set_ylabel("words (red: cut)")
    named = played[played["uptake"].notna()]
    middle.scatter(named["turn"], [1] * len(named), marker="o", s=60,
                   c=["#2a2" if bool(u) else "#c44" for u in named["uptake"]])
    middle.set_yticks([])
    middle.set_ylabel("uptake", rotation=0, ha="right")
    bottom.plot(played["turn"], played.get("repeated_4grams", 0), marker="o")
    bottom.set_ylabel("repeated 4-grams")
    bottom.set_xlabel("turn")
    fig.tight_layout()
    return fig
