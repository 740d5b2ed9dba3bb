"""The long-run recall evaluation's code, on a scripted narrator: the script
plants every fact, each probe is located in the prompt, the unguarded bank is
the guarded one with the model's texts put back."""
import pytest
from narrators import TaskNarrator

from experiments import recall_eval as ev


def test_the_script_plants_every_fact_once_between_its_bounds():
    spec = ev.CAMPAIGNS[0]
    rows = ev.script(spec, 200)
    planted = {fact.key: turn for turn, (_, _, fact) in enumerate(rows) if fact is not None}
    assert set(planted) == {f.key for f in spec.facts}
    assert min(planted.values()) == 4 and max(planted.values()) == 73
    for fact in spec.facts:
        assert fact.needle.lower() not in fact.probe.lower()  # a probe never says its fact
    story = " ".join(narration for _, narration, fact in rows if fact is None or fact.kind != "story")
    for fact in spec.facts:
        assert fact.needle.lower() not in story.lower()  # only the planting turn states it
    assert ev.script(spec, 200) == rows  # seeded


def test_at_least_forty_facts_of_every_kind_in_three_campaigns():
    facts = [f for spec in ev.CAMPAIGNS for f in spec.facts]
    assert len(ev.CAMPAIGNS) >= 3 and len(facts) >= 40
    assert {f.kind for f in facts} == set(ev.KINDS)
    halves = [ev.half_of(i) for spec in ev.CAMPAIGNS for i, _ in enumerate(spec.facts)]
    assert halves.count("tune") == halves.count("held_out")


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("recall")
    frame, builds = ev.evaluate(workdir, turns=60, campaigns=ev.CAMPAIGNS[:1], narrator=TaskNarrator(),
                                windows=(2048,), progress=False)
    yield frame, builds, workdir
    for b in builds:
        b.wb.close()


def test_every_fact_is_probed_in_every_condition_and_located(evaluated):
    frame, builds, _ = evaluated
    assert len(frame) == 14 * 2 * 2  # facts x banks x recalls
    assert set(frame["where"]) <= set(ev.LOCATIONS)
    rows = frame[frame.guard & (frame.recall == "parts")].set_index("fact")
    assert rows.loc["state-boat", "state"]
    assert rows.loc["state-boat", "memory"]  # the add_fact event reached the memory of its block too
    # the first facts left a 2,048-token window long before the probe
    assert not rows.loc["smith", "history"]
    summary = ev.summarise(frame)
    assert set(summary["half"]) == {"tune", "held_out"} and summary["facts"].sum() == len(frame)


def test_the_unguarded_bank_holds_the_models_own_memories(evaluated):
    frame, builds, _ = evaluated
    guarded, raw = (next(b for b in builds if b.guard is g) for g in (True, False))
    model = {e["raw"] for e in guarded.memory_log}
    texts = set(raw.camp.memories.frame()["text"])
    assert model <= texts and all(t.startswith("MEM[") for t in model)
    named = [e for e in guarded.memory_log if e["required"] and not any(i in e["raw"] for i in e["required"])]
    assert named and not any(e["accepted"] for e in named)  # an echo that kept no name was refused
    kept = set(guarded.camp.memories.frame()["text"])
    assert not any(e["raw"] in kept for e in named)


def test_a_built_bank_is_reopened_rather_than_written_again(evaluated):
    _, builds, workdir = evaluated
    spec = ev.CAMPAIGNS[0]
    again = ev.reopen(ev.bank_path(workdir, spec, True, 60), spec, narrator=TaskNarrator())
    assert again is not None and again.planted == next(b for b in builds if b.guard).planted
    again.wb.close()


def test_the_tuning_grid_asks_only_the_tuning_half(evaluated):
    _, builds, _ = evaluated
    grid = ev.tune(builds, story=(1.0,), lexical=(0.0, 0.5), window=2048)
    assert len(grid) == 2 and (grid["probes"] == 7).all()


def test_a_needle_in_the_input_alone_is_not_counted():
    report = {"sections": [{"name": "input", "text": "Thora Vance"}, {"name": "history", "text": "nothing"}]}
    assert ev.locate(report, "Thora Vance", "")["where"] == "nowhere"
    report["sections"].append({"name": "memories", "text": "Wren met Thora Vance."})
    assert ev.locate(report, "thora vance", "")["where"] == "memory"


def test_reguard_decides_each_text_again_from_the_models_reply(evaluated):
    _, builds, _ = evaluated
    guarded = next(b for b in builds if b.guard)
    before = list(guarded.camp.memories.frame()["text"])
    assert ev.reguard(guarded) == {"memories": 0, "summaries": 0}  # the same guard: nothing changes
    assert list(guarded.camp.memories.frame()["text"]) == before


class StopsAt(TaskNarrator):
    """A run killed part-way: the memory request after `calls` of them fails."""

    def __init__(self, calls):
        super().__init__()
        self.left = calls

    def execute(self, prompt):
        if prompt.task == "memory":
            self.left -= 1
            if self.left < 0:
                raise RuntimeError("the run was stopped")
        yield from super().execute(prompt)


def _story(built):
    return [e.text for e in built.camp.history()]


def test_a_bank_stopped_part_way_is_played_on_to_the_turns_a_whole_run_plays(tmp_path):
    spec = ev.CAMPAIGNS[1]
    whole = ev.build(tmp_path / "whole.db", spec, 40, narrator=TaskNarrator(), progress=False)
    path = ev.bank_path(tmp_path, spec, True, 40)
    with pytest.raises(RuntimeError):
        ev.build(path, spec, 40, narrator=StopsAt(6), progress=False)
    stopped = ev.reopen(path, spec, narrator=TaskNarrator())
    assert 10 < stopped.played < 40  # the file, not the log saved at turn 10, says how far play got
    ev.extend(stopped, path, 40, progress=False)
    assert stopped.played == 40 and _story(stopped) == _story(whole)
    assert stopped.planted == whole.planted
    assert (list(stopped.camp.memories.frame()["source_end"]) == list(whole.camp.memories.frame()["source_end"]))
    for b in (whole, stopped):
        b.wb.close()


def test_the_share_grid_asks_the_tuning_half_at_each_window_and_restores_the_builder(evaluated):
    _, builds, _ = evaluated
    before = [b.wb.settings.tuning for b in builds]
    grid = ev.caps(builds, live=(0.3, 1.0), summary=(0.4,), windows=(2048,))
    assert len(grid) == 2 and (grid["probes"] == 7).all()
    assert [b.wb.settings.tuning for b in builds] == before
    uncapped, capped = grid.set_index("live_share").loc[1.0], grid.set_index("live_share").loc[0.3]
    assert capped["history_tokens"] > uncapped["history_tokens"]  # the cap gives the story back its room


def test_the_reader_line_grid_decides_the_bank_again_and_puts_the_engine_back(evaluated):
    from engine.memory import guard

    _, builds, _ = evaluated
    guarded = next(b for b in builds if b.guard)
    before = list(guarded.camp.memories.frame()["text"])
    grid = ev.reader_lines(builds, (0, 1), window=2048)
    assert list(grid["reader_lines"]) == [0, 1] and (grid["probes"] == 7).all()
    assert guard.READER_LINES == 1 and list(guarded.camp.memories.frame()["text"]) == before


def test_the_judge_ab_reaches_memory_recall_and_puts_the_engine_back(evaluated):
    """A judge that ranks memories by the reverse of their length is asked on
    every probe of the tuning half; without one the engine's order stands."""
    from engine import memory as memory_package

    _, builds, _ = evaluated
    asked = []

    def judge(parts, texts):
        asked.append(len(texts))
        return [-len(t) for t in texts]

    before, judged_before = memory_package.recall, [b.wb.settings.tuning for b in builds]
    table = ev.judge_ab(builds, judge, judged=(3,), window=2048).set_index("judged")
    assert list(table.index) == [0, 3] and (table["probes"] == 7).all()
    assert asked and max(asked) <= 3 and len(asked) >= 7  # the judged arm only, each probe once at most 3
    assert memory_package.recall is before and [b.wb.settings.tuning for b in builds] == judged_before
    assert (table["judge_failures"] == 0).all()

    def broken(parts, texts):
        raise RuntimeError("the second model is not loaded")

    failed = ev.judge_ab(builds, broken, judged=(3,), window=2048).set_index("judged")
    assert failed.loc[3, "judge_failures"] >= 7 and failed.loc[0, "judge_failures"] == 0  # said, not read as "no gain"
