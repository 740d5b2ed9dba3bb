"""Long-run recall: facts planted early in a long campaign, asked for after it.

Three campaigns of scripted story (the reader's lines and the narration are
written here: a planted fact among varied travel filler), played into a
workbench file one turn at a time, with the derived work a player has after
every turn (memories, summary, embeddings, eviction) done by the real
narrator. So what is measured is recall, not a small model's prose: every
fact is stated the same way in every run, and only the memories and
summaries come from the model.

Fact kinds: `story` (stated once in the narration, to be carried by memory or
summary once it leaves the history window), `state` (an add_fact event only,
never in the prose), `card` (a story card whose key the probe names) and
`memory` (a memory the reader wrote, never in the story). After the last
turn each fact is asked for once, by a probe that returns to it by its place
or person without saying the fact ("I walk down to the ferry at
Ashwater."), as a dry run at each window; where its needle then sits in the
prompt is recorded: history, memory, summary, state, card or nowhere.

Conditions: the bank written with the memory guard on or off
(`engine.memory.guard`), each recalled by the query of parts and words
("parts") or by the old single embedded text ("single"). Model replies to
memory requests are cached, so the two banks differ only by the guard.

Weights of the recall (the search tuning's story_weight, lexical_weight) are chosen on the
probes of the tuning half (fact index even) and reported on the held-out
half (odd).
"""
from __future__ import annotations

import itertools
import json
import random
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from engine import Workbench
from engine.context import Report
from engine.memory.bank import embed_pending, evict, write_due_memories
from engine.memory.guard import READER_LINES
from engine.memory.summary import summarise_if_due
from engine.providers import Text
from engine.store import CampaignRow
from engine.story import StoryTree
from engine.turns.write import write_state

__all__ = ["CAMPAIGNS", "KINDS", "LOCATIONS", "WINDOWS", "CachingNarrator", "Fact", "Spec", "build", "caps", "evaluate",
           "extend", "half_of", "locate", "probe", "reader_lines", "reopen", "reguard", "raw_copy", "bank_path", "script", "summarise", "tune", "plot_locations", "guard_table"]

WINDOWS = (4096, 16384)
KINDS = ("story", "state", "card", "memory")
# Where a fact's needle is looked for, in this order; the first section holding it names where it was.
SECTIONS = {"history": "history", "history_recent": "history", "memories": "memory", "memories_new": "memory",
            "story_summary": "summary", "narrative_state": "state"}
LOCATIONS = ("history", "memory", "summary", "state", "card", "nowhere")
# The turns the facts are planted at, as the campaign had them: between turn 4 and turn 73 of 200.
FIRST_PLANT, LAST_PLANT, REFERENCE_TURNS = 4, 73, 200


@dataclass(frozen=True)
class Fact:
    key: str
    kind: str  # story | state | card | memory
    statement: str  # the narration (story), the fact's predicate (state), the card's entry, or the memory
    probe: str  # the reader's later line that returns to it
    needle: str  # what must reach the prompt
    setup: str = ""  # the reader's line the planting narration answers (story)
    card_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spec:
    title: str
    protagonist: str
    premise: str
    opening: str
    places: tuple[str, ...]  # filler places, repeated often
    facts: tuple[Fact, ...]


def _story(key, setup, statement, probe, needle):
    return Fact(key, "story", statement, probe, needle, setup)


SALT_ROAD = Spec(
    "The Salt Road", "Wren", "A courier carries sealed letters along the salt road to the coast.",
    "Dawn finds you at the milestone where the salt road leaves the hills, a satchel of letters on your back.",
    ("the salt road", "the Long Barrow", "Millbridge", "the chalk downs", "the drovers' inn", "the reed marsh"),
    (
        _story("smith", "I cross the ford and look for someone to mend my buckle.",
               "At the ford you meet the smith of Greyford, a broad woman named Thora Vance, who mends your "
               "buckle for two coppers and warns you off the marsh path.",
               "I go back to Greyford to find the smith.", "Thora Vance"),
        _story("password", "I ask the fisherman how to reach the smugglers.",
               "The fisherman leans close: the password to the smugglers' tunnel under Lantern Quay is 'gull and "
               "anchor', and a wrong word gets a knife.",
               "I knock at the smugglers' tunnel under Lantern Quay and give the password.", "gull and anchor"),
        _story("duke", "I ask the archivist about the old duke.",
               "The archivist lowers her voice: the old duke was poisoned with nightshade by his own steward, "
               "Corvin Marsh, who now keeps the castle keys.",
               "I ask the archivist again how the old duke died.", "nightshade"),
        _story("ferry", "I ask at the harbour about crossing the estuary.",
               "The ferryman at Ashwater is a one-eyed man called Pell, who crosses only at low tide and takes a "
               "silver ring as his fare.",
               "I walk down to the ferry at Ashwater.", "Pell"),
        _story("letter", "I check the seals on my letters.",
               "One letter is addressed to Abbess Ysolde at Saint Brannoc's, sealed in green wax with a heron.",
               "I look for the letter meant for Saint Brannoc's.", "Ysolde"),
        _story("debt", "I sit with the drover at the fire.",
               "The drover, Hamm Coyle, admits he owes forty crowns to the moneylender of Tarrow and cannot pay.",
               "I ask the drover what he owes in Tarrow.", "forty crowns"),
        _story("wound", "I look at the scar on the guard's arm.",
               "The guard Bryn Oakes took that scar at the siege of Kettle Hill, from a crossbow bolt.",
               "I ask Bryn Oakes about the old siege.", "Kettle Hill"),
        _story("bell", "I ask why the chapel bell is silent.",
               "The chapel bell of Saltcombe was cracked in the great frost of 1184, and nobody has rung it since.",
               "I climb the chapel tower at Saltcombe and look at the bell.", "1184"),
        Fact("state-boat", "state", "the courier's boat at Ashwater is named Marigold",
             "I look for my boat at Ashwater harbour.", "Marigold"),
        Fact("state-cipher", "state", "the courier's letters use the cipher of the Three Ravens",
             "I try to read the coded letter with the right cipher.", "Three Ravens"),
        Fact("card-tarrow", "card", "Tarrow is a toll town where the bridge warden, Ida Crane, checks every seal.",
             "I reach the toll bridge at Tarrow.", "Ida Crane", card_keys=("Tarrow",)),
        Fact("card-downs", "card", "The Whistling Stones on the chalk downs mark the grave of the giant Orm.",
             "I rest by the Whistling Stones.", "Orm", card_keys=("Whistling Stones",)),
        Fact("memory-sister", "memory", "Wren's sister Maud works as a clerk at the customs house in Saltcombe.",
             "I visit the customs house in Saltcombe.", "Maud"),
        Fact("memory-oath", "memory", "Wren swore on the salt never to open a sealed letter.",
             "I hold the sealed letter and think about opening it.", "swore on the salt"),
    ),
)

BLACK_FEN = Spec(
    "Black Fen", "Ada", "An apothecary travels the fen villages during a winter fever.",
    "Ada's cart rolls off the causeway into the first of the fen villages, the fever bell tolling ahead.",
    ("the causeway", "Dunmere", "the peat cuttings", "the willow carr", "the eel weirs", "the ferry stage"),
    (
        _story("cure", "I ask the herbwife what breaks the fever.",
               "The herbwife, Old Nell Sorrow, says only bog myrtle boiled with honey breaks the winter fever.",
               "I ask the herbwife again what breaks the fever.", "bog myrtle"),
        _story("mill", "I ask who owns the drowned mill.",
               "The drowned mill at Fosse End belonged to the miller Gideon Rusk, who vanished the night the "
               "sluice broke.",
               "I wade out to the drowned mill at Fosse End.", "Gideon Rusk"),
        _story("lantern", "I ask about the lights over the marsh.",
               "The lights over Hobb's Mire are lanterns of the eel poachers, who signal with three short flashes.",
               "I watch the lights over Hobb's Mire.", "three short flashes"),
        _story("priest", "I ask the sexton about the priest.",
               "The sexton says Father Aldous keeps the parish silver buried under the yew in the churchyard.",
               "I ask the sexton where the parish silver is kept.", "yew"),
        _story("child", "I ask about the sick child.",
               "The sick child at Reedham is Tam, the reeve's son, and his fever turned on the ninth day.",
               "I go to Reedham to see the reeve's sick son.", "Tam"),
        _story("map", "I unroll the map the ferryman sold me.",
               "The map marks a dry path across the fen from Cold Harbour to the abbey, passable only in frost.",
               "I look for the dry path from Cold Harbour.", "passable only in frost"),
        _story("rival", "I ask who else sells remedies here.",
               "A rival quack, Silas Venn, sells chalk pills as a fever cure from a painted wagon.",
               "I look for the painted wagon of the other remedy seller.", "Silas Venn"),
        _story("price", "I ask the abbey's cellarer what he pays for physic.",
               "The cellarer of Thornby Abbey pays twelve shillings a jar for feverfew salve, and no more.",
               "I offer the cellarer of Thornby Abbey my salve.", "twelve shillings"),
        Fact("state-mule", "state", "Ada's mule is named Bramble and is lame in the left foreleg",
             "I check on my mule before the journey.", "Bramble"),
        Fact("state-ledger", "state", "Ada owes the guild of apothecaries nine marks in dues",
             "I look over what I owe the guild of apothecaries.", "nine marks"),
        Fact("card-abbey", "card", "Thornby Abbey's infirmarian, Sister Hild, trusts no travelling healer.",
             "I knock at the infirmary of Thornby Abbey.", "Sister Hild", card_keys=("Thornby Abbey",)),
        Fact("card-weirs", "card", "The eel weirs belong to the Fen Reeve, who fines anyone fishing them a goose.",
             # "Fen Reeve", not "goose": the filler's "Children chase a goose" put the needle in the history.
             "I set a line at the eel weirs.", "Fen Reeve", card_keys=("eel weirs",)),
        Fact("memory-teacher", "memory", "Ada learned her trade from Master Osric of Lincoln, who died of the fever.",
             "I think about the man who taught me my trade.", "Osric"),
        Fact("memory-vow", "memory", "Ada promised the reeve's wife to return before Candlemas.",
             "I count the days left before I must return to the reeve's wife.", "Candlemas"),
    ),
)

IRON_PASS = Spec(
    "The Iron Pass", "Kestrel", "A mercenary scout guides a caravan over the mountains before the snows.",
    "The caravan's mules stamp in the cold below the Iron Pass as you check the straps for the climb.",
    ("the switchbacks", "the scree slope", "the shepherd huts", "Cairn Gap", "the pine woods", "the frozen tarn"),
    (
        _story("guide", "I ask who knows the high path.",
               "The only guide who knows the high path is a goatherd named Yara Stone, who asks a wool cloak as pay.",
               "I ask for the goatherd who knows the high path.", "Yara Stone"),
        _story("avalanche", "I ask about the buried village.",
               "The village of Hollin was buried by an avalanche forty winters ago; eleven families died.",
               "I dig near the buried village of Hollin.", "eleven families"),
        _story("cargo", "I check what the caravan really carries.",
               "Beneath the wool bales the merchant Osmund Gray hides six crates of blackpowder for the rebels.",
               "I open the wool bales on the merchant's wagons.", "blackpowder"),
        _story("bridge", "I ask about the rope bridge.",
               "The rope bridge over Ravensgill holds four mules at most; a fifth snapped it two years ago.",
               "I lead the mules onto the rope bridge over Ravensgill.", "four mules"),
        _story("hermit", "I ask about the hermit of the heights.",
               "The hermit of the Eyrie, Brother Calder, once served as the king's own astronomer.",
               "I climb to the Eyrie to speak with the hermit.", "astronomer"),
        _story("wolves", "I ask the shepherd about the wolves.",
               "The shepherd says the wolves of the Grey Corrie follow a white she-wolf the herders call Morrow.",
               "I listen for the wolves of the Grey Corrie.", "Morrow"),
        _story("toll", "I ask what the fort charges.",
               "The captain of Fort Skarn, Hesta Blaine, charges one mule in ten as toll, paid in advance.",
               "I ride up to the gate of Fort Skarn.", "one mule in ten"),
        _story("spring", "I ask where to find water above the snowline.",
               "Above the snowline the only clean water is the hot spring at Steam Hollow, below the black crag.",
               "I look for water above the snowline.", "Steam Hollow"),
        Fact("state-horse", "state", "Kestrel's horse is a grey mare named Sleet",
             "I saddle my horse for the descent.", "Sleet"),
        Fact("state-pay", "state", "the caravan master owes Kestrel thirty silver for the crossing",
             "I ask the caravan master for my pay.", "thirty silver"),
        Fact("card-skarn", "card", "Fort Skarn's cellars hold the prisoners of the last rebellion, chained in ice.",
             "I ask what lies beneath Fort Skarn.", "chained in ice", card_keys=("Fort Skarn",)),
        Fact("card-tarn", "card", "The frozen tarn hides the sunken bell of the old monastery of Saint Ulf.",
             "I walk out onto the frozen tarn.", "Saint Ulf", card_keys=("frozen tarn",)),
        Fact("memory-brother", "memory", "Kestrel's brother Rook deserted the king's army at Dunholm.",
             "I think about my brother and the war.", "Dunholm"),
        Fact("memory-scar", "memory", "Kestrel lost two fingers of the left hand to frostbite on the Iron Pass.",
             "I pull off my glove and look at my hand.", "two fingers"),
    ),
)

CAMPAIGNS = (SALT_ROAD, BLACK_FEN, IRON_PASS)

_DOINGS = ("walk on along {p}", "rest for a while near {p}", "buy bread at a stall near {p}",
           "water the animals at {p}", "ask a traveller about the road past {p}", "look at the sky above {p}",
           "count my coins by {p}", "follow the track through {p}", "mend my boot beside {p}",
           "watch the carts go by at {p}")
_WEATHER = ("A thin rain drifts in from the west.", "The wind drops and the air turns mild.",
            "Clouds pile up over the hills.", "A pale sun breaks through for an hour.",
            "Frost whitens the ruts of the track.", "Mist hangs low over the ground.")
_SCENES = ("Carters pass with loads of turnips and say little.", "A dog barks somewhere behind a hedge.",
           "Smoke rises from a cottage chimney and smells of peat.", "A pedlar offers ribbons and needles.",
           "Children chase a goose across the way.", "An old woman sells hot chestnuts from a brazier.",
           "Two monks walk by, arguing about the price of wax.", "The road is churned to mud by cattle.",
           "A milestone leans half hidden in the nettles.", "Crows rise from a stubble field.")
_ENDINGS = ("You press on as the day wears away.", "Nothing else happens worth remembering.",
            "The way ahead looks long but plain.", "You feel the miles in your legs.",
            "By evening you find a dry place to sleep.", "The hours pass quietly.")


def script(spec: Spec, turns: int, seed: int = 0) -> list[tuple[str, str, Fact | None]]:
    """(reader's line, narration, fact planted this turn or None) for every turn.

    Facts are spread between turn 4 and turn 73 of 200 (scaled to `turns`),
    in the spec's order; filler is drawn from a seeded mixer of places,
    doings, weather and scenes, so no two runs of one seed differ."""
    rng = random.Random(f"{spec.title}-{seed}")
    first = max(1, round(FIRST_PLANT * turns / REFERENCE_TURNS))
    last = max(first + len(spec.facts), round(LAST_PLANT * turns / REFERENCE_TURNS))
    at = {round(first + i * (last - first) / max(1, len(spec.facts) - 1)): f for i, f in enumerate(spec.facts)}
    rows = []
    for turn in range(turns):
        fact = at.get(turn)
        place = rng.choice(spec.places)
        doing = f"I {rng.choice(_DOINGS).format(p=place)}."
        filler = " ".join([rng.choice(_WEATHER), rng.choice(_SCENES), rng.choice(_SCENES), rng.choice(_ENDINGS)])
        if fact is not None and fact.kind == "story":
            rows.append((fact.setup, f"{fact.statement} {rng.choice(_ENDINGS)}", fact))
        else:
            rows.append((doing, filler, fact))
    return rows


def half_of(index: int) -> str:
    """Tuning half (even fact index) or held-out half (odd)."""
    return "tune" if index % 2 == 0 else "held_out"


class CachingNarrator:
    """The real narrator, with its replies to derived-work requests kept: the
    guarded and unguarded banks ask the same memory requests, and get the
    same replies, so they differ by the guard alone."""

    def __init__(self, narrator, cache: dict | None = None):
        self.narrator = narrator
        self.model_id = narrator.model_id
        self.cache = {} if cache is None else cache
        self.calls = 0

    def context_window(self):
        return self.narrator.context_window()

    def execute(self, prompt) -> Iterator:
        key = (prompt.system, prompt.story, prompt.max_tokens, getattr(prompt, "task", ""))
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = "".join(c.text for c in self.narrator.execute(prompt) if isinstance(c, Text))
        yield Text(self.cache[key])


@dataclass
class Built:
    wb: Workbench
    camp: object
    spec: Spec
    guard: bool
    memory_log: list = field(default_factory=list)
    summary_log: list = field(default_factory=list)
    planted: dict = field(default_factory=dict)  # fact key -> turn
    played: int = 0  # turns played (a bank reopened from a run stopped early has fewer than asked)
    reguarded: dict = field(default_factory=dict)  # texts the current guard decided otherwise (`reguard`)


def _append_turn(wb, campaign_id: int, player: str, narration: str, events: list[dict]) -> None:
    with wb.db.writing() as s:
        campaign = s.get(CampaignRow, campaign_id)
        tree = StoryTree(s, campaign)
        state = dict(campaign.state or {})
        tree.append("player", f"> {player}", state)
        node = tree.append("narrator", narration, state)
        s.flush()
        if events:
            write_state(s, campaign, node, state, events, source="narrator")


def _log_path(path: Path) -> Path:
    return path.with_suffix(".log.json")


def reopen(path: str | Path, spec: Spec, *, narrator, embedder: str = "local") -> Built | None:
    """A bank built earlier (its file and its log beside it), or None."""
    path = Path(path)
    if not (path.exists() and _log_path(path).exists()):
        return None
    saved = json.loads(_log_path(path).read_text(encoding="utf-8"))
    if saved.get("title") != spec.title:
        return None
    wb = Workbench.open(path, background=False)
    wb.configure(narrator=narrator, embedder=embedder)
    camp = wb.campaign(saved["campaign_id"])
    while embed_pending(wb.db, camp.id, wb.embedder):
        pass
    # The file, not the log, says how far play got: the log is saved every SAVE_EVERY turns, so a run
    # stopped between saves left a few turns (and their memories) in the file that the log lacks.
    con = sqlite3.connect(str(path))
    played = con.execute("SELECT COUNT(*) FROM nodes WHERE campaign_id = ? AND kind = 'narrator'",
                         (saved["campaign_id"],)).fetchone()[0]
    con.close()
    return Built(wb, camp, spec, saved["guard"], saved["memory_log"], saved["summary_log"], saved["planted"],
                 max(played, saved.get("played", 0)))


def build(path: str | Path, spec: Spec, turns: int, *, narrator, embedder: str = "local", guard: bool = True,
          cache: dict | None = None, seed: int = 0, progress: bool = True) -> Built:
    """A fresh workbench file holding `spec` played for `turns` turns of its
    script, with derived work after every turn by `narrator` (the workbench's
    own narrator name, e.g. "local", or a Narrator object). Its log is saved
    beside it, so `reopen` can probe it again without writing it again."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    wb = Workbench.open(path, background=False)
    wb.configure(narrator=narrator, embedder=embedder)
    camp = wb.new_campaign(spec.title, premise=spec.premise, protagonist=spec.protagonist, opening=spec.opening)
    return _play(path, Built(wb, camp, spec, guard), turns, cache=cache, seed=seed, progress=progress)


def extend(built: Built, path: str | Path, turns: int, *, cache: dict | None = None, seed: int = 0,
           progress: bool = True) -> Built:
    """A bank a run stopped early (`reopen`) played on to `turns`: the
    script is seeded, so turns played later are the very turns a run that
    never stopped would have played, with derived work as before. What the
    log missed (it is saved every SAVE_EVERY turns) is read from the script."""
    rows = script(built.spec, turns, seed)[:built.played]
    built.planted.update({fact.key: turn for turn, (_, _, fact) in enumerate(rows) if fact is not None})
    return _play(Path(path), built, turns, cache=cache, seed=seed, progress=progress)


def _play(path: Path, out: Built, turns: int, *, cache: dict | None, seed: int, progress: bool) -> Built:
    """Play `out`'s script from the turn it stopped at to `turns`."""
    wb, camp, spec, guard = out.wb, out.camp, out.spec, out.guard
    talker = CachingNarrator(wb.narrator, cache)
    settings = wb.settings
    rows = list(enumerate(script(spec, turns, seed)))[out.played:]
    for turn, (player, narration, fact) in tqdm(rows, desc=spec.title, disable=not progress):
        events = []
        if fact is not None and fact.kind == "state":
            events = [{"type": "add_fact", "fact_id": fact.key, "predicate": fact.statement}]
        _append_turn(wb, camp.id, player, narration, events)
        out.played = turn + 1
        if fact is not None:
            out.planted[fact.key] = turn
            if fact.kind == "card":
                camp.add_story_card(fact.key, keys=list(fact.card_keys), entry=fact.statement)
            elif fact.kind == "memory":
                camp.memories.add(fact.statement)
        write_due_memories(wb.db, camp.id, talker, guard=guard, log=out.memory_log)
        summarise_if_due(wb.db, camp.id, talker, guard=guard, log=out.summary_log)
        embed_pending(wb.db, camp.id, wb.embedder)
        evict(wb.db, camp.id, settings.memory_capacity)
        if (turn + 1) % SAVE_EVERY == 0:  # a run stopped early can still be probed where it got to
            _save_log(path, out, turn + 1, talker.calls)
    while embed_pending(wb.db, camp.id, wb.embedder):
        pass
    _save_log(path, out, turns, talker.calls)
    return out


SAVE_EVERY = 10


def _save_log(path: Path, out: Built, played: int, calls: int) -> None:
    _log_path(path).write_text(json.dumps({
        "title": out.spec.title, "campaign_id": out.camp.id, "guard": out.guard, "played": played,
        "memory_log": out.memory_log, "summary_log": out.summary_log, "planted": out.planted,
        "model_calls": calls}), encoding="utf-8")


def locate(report, needle: str, probe_text: str) -> dict:
    """Which prompt sections hold `needle`; `where` is the first of LOCATIONS."""
    needle = needle.lower()
    found = {place: False for place in LOCATIONS[:-1]}
    report = report if isinstance(report, Report) else Report(report)
    for section in report.sections:
        name, text = section.name, section.text.lower()
        if name == "input" or needle not in text:
            continue
        if name in SECTIONS:
            found[SECTIONS[name]] = True
        elif name not in ("narrator_rules", "emit_rule"):
            found["card"] = True
    where = next((place for place in LOCATIONS[:-1] if found[place]), "nowhere")
    return {**found, "where": where, "reached": where != "nowhere"}


@contextmanager
def tuned(builds: Sequence[Built], **changes):
    """Each campaign's workbench run with its search tuning changed (a copy of
    the engine's, `dataclasses.replace`; None leaves a value as it is), then
    set back: the value the turn's report records, never a module's constant."""
    changes = {k: v for k, v in changes.items() if v is not None}
    saved = [(b.wb, b.wb.settings.tuning) for b in builds]
    try:
        for wb, tuning in saved:
            wb.configure(tuning=replace(tuning, **changes))
        yield
    finally:
        for wb, tuning in saved:
            wb.configure(tuning=tuning)


def weights(builds: Sequence[Built], story: float | None = None, lexical: float | None = None):
    """The recall's two weights for the duration (the tuning grid)."""
    return tuned(builds, story_weight=story, lexical_weight=lexical)


@contextmanager
def _recall_with(**fixed):
    """The engine's memory recall called with `fixed` keyword arguments, for the duration."""
    from engine import memory as memory_package

    original = memory_package.recall

    def chosen(*args, **kwargs):
        return original(*args, **{**kwargs, **fixed})

    memory_package.recall = chosen
    try:
        yield
    finally:
        memory_package.recall = original


def method(name: str):
    """Recall by "parts" (the engine's) or "single" (the one embedded text of before)."""
    return _recall_with(method=name)


@contextmanager
def judging(builds: Sequence[Built], judge, judged: int | None = None):
    """Memory recall with `judge` (e.g. `second_stage_judge()`) re-scoring the
    first score's best `judged` memories, for the duration."""
    with _recall_with(judge=judge), tuned(builds, judged=judged):
        yield


def second_stage_judge(kind: str = "embedded", settings=None):
    """The knowledge library's second stage as a memory judge: "embedded"
    (all-mpnet-base-v2), or "endpoint" / "rerank" at the server `settings`
    (a workbench's, e.g. `builds[0].wb.settings`) name."""
    from dataclasses import replace
    from functools import partial

    from engine.knowledge import stage_for
    from engine.providers.embedders import MINILM_ID
    from engine.search import relevance
    from engine.settings import Settings

    stage = stage_for(replace(settings or Settings(), second_stage=kind), MINILM_ID)
    if stage is None:
        raise ValueError(f"No second stage for {kind!r}: use 'embedded', 'endpoint' or 'rerank'.")
    return partial(relevance, stage)


def judge_ab(builds: Sequence[Built], judge, judged: Sequence[int] = (5, 10, 20), window: int = 4096,
             half: str | None = "tune") -> pd.DataFrame:
    """Per number of memories judged (0: no judge, the engine's first score
    alone): the share of `half`'s probes (None: all) whose fact was in the
    memories section and reached the prompt at `window`, on the guarded banks.
    `judge_failures` counts the calls the judge failed (recall then keeps its
    first order, so a broken judge would otherwise read as "no gain")."""
    failures = 0

    def counted(parts, texts):
        nonlocal failures
        try:
            return judge(parts, texts)
        except Exception:
            failures += 1
            raise

    rows = []
    for count in (0, *judged):
        failures, frames = 0, []
        with judging(builds, counted, count) if count else nullcontext():
            for b in builds:
                keys = [f.key for i, f in enumerate(b.spec.facts) if half is None or half_of(i) == half]
                if b.guard:
                    frames.append(probe(b, (window,), "parts", keys))
        frame = pd.concat(frames)
        rows.append({"judged": count, "window": window, "half": half or "both", "in_memory": frame["memory"].mean(),
                     "reached": frame["reached"].mean(), "probes": len(frame), "judge_failures": failures})
    return pd.DataFrame(rows)


def probe(built: Built, windows: Sequence[int] = WINDOWS, recall: str = "parts",
          keys: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per fact and window: where its needle was in the prompt the probe would be built with."""
    rows = []
    camp, spec = built.camp, built.spec
    for window in windows:
        built.wb.configure(context_budget=window, n_ctx=max(window, 4096))
        with method(recall):
            for index, fact in enumerate(spec.facts):
                if (keys is not None and fact.key not in keys) or fact.key not in built.planted:
                    continue  # not asked, or not planted yet (a run stopped early)
                report = camp.context(fact.probe)
                rows.append({"campaign": spec.title, "fact": fact.key, "kind": fact.kind, "half": half_of(index),
                             "window": window, "guard": built.guard, "recall": recall,
                             "planted_turn": built.planted.get(fact.key), "turns_played": built.played,
                             "history_tokens": report["tokens"].get("history_spent"),
                             **locate(report, fact.needle, fact.probe)})
    return pd.DataFrame(rows)


def raw_copy(built: Built, path: str | Path, *, narrator, embedder: str = "local") -> Built:
    """The same campaign with the model's own memories and summaries put back
    where the guard replaced them: the bank as it was before the guard.

    Built from the guarded run's log instead of by a second run of the model
    (a 200-turn bank costs the 135M model an hour on a shared 2-core
    machine): each memory's text is the model's reply to the very same request;
    each summary's is the model's reply to the guarded run's request, whose
    inputs were the guarded memories (the one approximation)."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    source = sqlite3.connect(str(built.wb.db.path))
    target = sqlite3.connect(str(path))
    source.backup(target)
    source.close()
    raw = {(e["start"], e["end"]): e["raw"] for e in built.memory_log}
    rows = target.execute("SELECT id, source_start, source_end FROM memories WHERE campaign_id = ?",
                          (built.camp.id,)).fetchall()
    for memory_id, start, end in rows:
        if (start, end) in raw:
            target.execute("UPDATE memories SET text = ?, vector = NULL, vector_model = '' WHERE id = ?",
                           (raw[(start, end)] or "(empty)", memory_id))
    summaries = [r[0] for r in target.execute("SELECT id FROM summaries WHERE campaign_id = ? AND trigger = "
                                              "'interval' ORDER BY id", (built.camp.id,)).fetchall()]
    for summary_id, entry in zip(summaries, built.summary_log, strict=False):
        target.execute("UPDATE summaries SET text = ? WHERE id = ?", (entry["raw"] or "(empty)", summary_id))
    target.commit()
    target.close()
    wb = Workbench.open(path, background=False)
    wb.configure(narrator=narrator, embedder=embedder)
    camp = wb.campaign(built.camp.id)
    while embed_pending(wb.db, camp.id, wb.embedder):
        pass
    log = [{**e, "kept": e["raw"]} for e in built.memory_log]
    return Built(wb, camp, built.spec, False, log, built.summary_log, built.planted, built.played)


def reguard(built: Built, reader_lines: int = READER_LINES) -> dict:
    """The engine's guard as it now stands, applied to a bank written under an
    earlier version of it: each memory and summary decided again from the
    model's own reply (kept in the log) and what it summarised (read from the
    file), so a bank that took an hour of model time need not be written again
    when the guard changes. Returns how many texts changed."""
    from engine.budget import tokens
    from engine.memory import bank as memory_bank
    from engine.memory import summary as memory_summary
    from engine.memory.authority import classify_authority
    from engine.memory.facts import said_by
    from engine.memory.prompts import EXCERPT_TOKENS

    con = sqlite3.connect(str(built.wb.db.path))
    kinds = memory_bank.STORY_KINDS
    rows = con.execute(f"SELECT branch_id, depth, text, id, kind FROM nodes WHERE campaign_id = ? AND kind IN "
                       f"({', '.join('?' * len(kinds))}) ORDER BY depth", (built.camp.id, *kinds)).fetchall()
    nodes, ids, kind_at = [r[:3] for r in rows], {r[1]: r[3] for r in rows}, {r[1]: r[4] for r in rows}
    name = built.spec.protagonist
    changed = {"memories": 0, "summaries": 0}
    for entry in built.memory_log:
        block = [n for n in nodes if entry["start"] <= n[1] <= entry["end"]]
        # The head when it was written: a turn adds two nodes, and the first memory waits for MEMORY_START of them.
        head = max(entry["end"] + 2, memory_bank.MEMORY_START)
        corpus = tuple(n[2] for n in nodes if n[1] <= head)
        with built.wb.db.reading() as s:
            facts = tuple(memory_bank.block_facts(s, [ids[n[1]] for n in block]))
        said = tuple(said_by(n[1], kind_at[n[1]], n[2], name) for n in block if kind_at[n[1]] != "direction")
        log: list = []
        kept = memory_bank.block_memories(entry["raw"], memory_bank.Block(
            block, "", name, corpus[-memory_bank.RARITY_NODES:], facts, said), log=log) if built.guard else None
        if kept is not None and log[0]["kept"] != entry["kept"]:
            # The block's memories, anchored at its end, written again as the engine now writes them.
            con.execute("DELETE FROM memories WHERE campaign_id = ? AND depth = ? AND pinned = 0",
                        (built.camp.id, entry["end"]))
            branch = next(n[0] for n in block if n[1] == entry["end"])
            for fact in kept:
                con.execute("INSERT INTO memories (campaign_id, text, branch_id, depth, source_start, source_end, "
                            "authority, pinned, forgotten, use_count, vector_model, created_at) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, 0, 0, 0, '', datetime('now'))",
                            (built.camp.id, fact.text, branch, entry["end"], fact.start, fact.end,
                             classify_authority(fact.text)))
            changed["memories"] += 1
        if log:
            entry.update(log[0])
    rows = con.execute("SELECT id, depth, source_start FROM summaries WHERE campaign_id = ? AND trigger = 'interval' "
                       "ORDER BY id", (built.camp.id,)).fetchall()
    base, anchor = "", -1
    for (summary_id, depth, _), entry in zip(rows, built.summary_log, strict=False):
        memories = [r[0] for r in con.execute("SELECT text FROM memories WHERE campaign_id = ? AND depth > ? AND "
                                              "depth <= ? ORDER BY depth", (built.camp.id, anchor, depth))]
        uncovered = [n[2] for n in nodes if anchor < n[1] <= depth]
        sources = memories or [tokens.last("\n\n".join(uncovered), EXCERPT_TOKENS)]
        log = []
        kept = memory_summary.guarded(entry["raw"], base, sources, name, log=log)
        if kept != entry["kept"]:
            con.execute("UPDATE summaries SET text = ? WHERE id = ?", (kept, summary_id))
            changed["summaries"] += 1
        entry.update(log[0])
        base, anchor = kept, depth
    con.commit()
    con.close()
    while embed_pending(built.wb.db, built.camp.id, built.wb.embedder):
        pass
    return changed


def bank_path(workdir: str | Path, spec: Spec, guard: bool, turns: int) -> Path:
    return Path(workdir) / f"{spec.title.lower().replace(' ', '_')}_{'guarded' if guard else 'raw'}_{turns}.db"


def evaluate(workdir: str | Path, *, turns: int = 200, campaigns: Sequence[Spec] = CAMPAIGNS,
             narrator="local", embedder: str = "local", windows: Sequence[int] = WINDOWS,
             guards: Sequence[bool] = (False, True), reuse: bool = False, raw_from_log: bool = True,
             extend_reused: bool = True, progress: bool = True) -> tuple[pd.DataFrame, list[Built]]:
    """Every campaign built once per guard setting (or, with `reuse`, opened
    where an earlier run left it, played on to `turns` unless
    `extend_reused` is off) and probed with both recalls. With
    `raw_from_log` the unguarded bank is the guarded one with the model's own
    texts put back (`raw_copy`), not a second run of the model."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    frames, builds, cache = [], [], {}
    for spec, guard in itertools.product(campaigns, sorted(guards, reverse=True)):
        path = bank_path(workdir, spec, guard, turns)
        built = reopen(path, spec, narrator=narrator, embedder=embedder) if reuse else None
        if built is not None and built.played < turns and extend_reused:
            built = extend(built, path, turns, cache=cache, progress=progress)
        if built is not None and built.guard:
            built.reguarded = reguard(built)
        guarded = next((b for b in builds if b.spec is spec and b.guard), None)
        if built is None and not guard and raw_from_log and guarded is not None:
            built = raw_copy(guarded, path.with_name(path.stem + "_from_log.db"), narrator=narrator,
                             embedder=embedder)
        if built is None:
            built = build(path, spec, turns, narrator=narrator, embedder=embedder, guard=guard, cache=cache,
                          progress=progress)
        builds.append(built)
        for recall in ("single", "parts"):
            frames.append(probe(built, windows, recall))
    return pd.concat(frames, ignore_index=True), builds


def tune(builds: Sequence[Built], story: Sequence[float] = (0.6, 0.8, 1.0),
         lexical: Sequence[float] = (0.0, 0.25, 0.5, 1.0), window: int = 4096) -> pd.DataFrame:
    """Share of the tuning half's probes whose fact reached the prompt, per
    pair of recall weights, on the guarded banks at `window`."""
    rows = []
    tuning = {b.spec.title: [f.key for i, f in enumerate(b.spec.facts) if half_of(i) == "tune"] for b in builds}
    for s, w in itertools.product(story, lexical):
        with weights(builds, s, w):
            frame = pd.concat([probe(b, (window,), "parts", tuning[b.spec.title]) for b in builds if b.guard])
        rows.append({"story_weight": s, "lexical_weight": w, "reached": frame["reached"].mean(),
                     "in_memory": frame["memory"].mean(), "probes": len(frame)})
    return pd.DataFrame(rows).sort_values(["reached", "in_memory"], ascending=False, ignore_index=True)


def shares(builds: Sequence[Built], live: float | None = None, summary: float | None = None):
    """The prompt's memory and summary shares for the duration (the cap grid)."""
    return tuned(builds, memory_share=live, summary_share=summary)


def caps(builds: Sequence[Built], live: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 1.0),
         summary: Sequence[float] = (0.3, 0.4, 0.5), windows: Sequence[int] = (2048, 4096)) -> pd.DataFrame:
    """Per pair of builder shares and window: the tuning half's facts that
    reached the prompt and the history tokens the prompts kept (the two
    things a cap trades), on the guarded banks with the parts recall."""
    rows = []
    tuning = {b.spec.title: [f.key for i, f in enumerate(b.spec.facts) if half_of(i) == "tune"] for b in builds}
    for share, part in itertools.product(live, summary):
        with shares(builds, share, part):
            frame = pd.concat([probe(b, windows, "parts", tuning[b.spec.title]) for b in builds if b.guard])
        for window, rows_at in frame.groupby("window"):
            rows.append({"live_share": share, "summary_share": part, "window": window,
                         "reached": rows_at["reached"].mean(), "history_tokens": rows_at["history_tokens"].median(),
                         "probes": len(rows_at)})
    return pd.DataFrame(rows)


def reader_lines(builds: Sequence[Built], values: Sequence[int] = (0, 1), window: int = 4096) -> pd.DataFrame:
    """Per value of the guard's `reader_lines` (how many of the reader's own
    lines an extractive memory keeps first): the tuning half's facts that
    reached the prompt at `window`, every guarded bank decided again under it
    (`reguard`, no model call). The banks are decided again at the engine's
    own value after."""
    rows = []
    tuning = {b.spec.title: [f.key for i, f in enumerate(b.spec.facts) if half_of(i) == "tune"] for b in builds}
    try:
        for value in values:
            for b in builds:
                if b.guard:
                    reguard(b, reader_lines=value)
            frame = pd.concat([probe(b, (window,), "parts", tuning[b.spec.title]) for b in builds if b.guard])
            rows.append({"reader_lines": value, "window": window, "reached": frame["reached"].mean(),
                         "in_memory": frame["memory"].mean(), "probes": len(frame)})
    finally:
        for b in builds:
            if b.guard:
                reguard(b)
    return pd.DataFrame(rows)


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Share of facts that reached the prompt, per condition, window and half."""
    frame = frame.assign(condition=frame["guard"].map({True: "guarded", False: "raw"}) + " bank, "
                         + frame["recall"] + " recall")
    return (frame.groupby(["condition", "window", "half"])["reached"].agg(["mean", "sum", "count"])
            .rename(columns={"mean": "reached_share", "sum": "reached", "count": "facts"}).reset_index())


def locations(frame: pd.DataFrame) -> pd.DataFrame:
    """Where the facts were, counted per condition, window and kind."""
    return (frame.groupby(["guard", "recall", "window", "kind", "where"]).size().unstack("where", fill_value=0)
            .reindex(columns=list(LOCATIONS), fill_value=0).reset_index())


def guard_table(builds: Sequence[Built]) -> pd.DataFrame:
    """Per guarded bank: how many model memories and summaries the guard
    let stand, and, for each block that held a planted story fact, whether
    the model's memory kept its needle and whether the kept memory did."""
    rows = []
    for b in builds:
        if not b.guard:
            continue
        planted = {k: t for k, t in b.planted.items()}
        story = {f.key: f for f in b.spec.facts if f.kind == "story"}
        for entry in b.memory_log:
            # story depth: the opening is depth 0, turn t is depths 2t+1 (reader) and 2t+2 (narration)
            held = [k for k, t in planted.items() if k in story and entry["start"] <= 2 * t + 2 <= entry["end"]]
            for key in held or [None]:
                needle = story[key].needle.lower() if key else None
                rows.append({"campaign": b.spec.title, "start": entry["start"], "fact": key,
                             "model_accepted": entry["accepted"], "reason": entry["reason"],
                             "model_kept_needle": None if key is None else needle in entry["raw"].lower(),
                             "stored_kept_needle": None if key is None else needle in entry["kept"].lower(),
                             "raw": entry["raw"], "kept": entry["kept"]})
    return pd.DataFrame(rows)


def plot_locations(frame: pd.DataFrame):
    """Stacked bars: where each kind of fact was, guarded bank with the parts recall, per window."""
    import matplotlib.pyplot as plt

    chosen = frame[(frame["guard"]) & (frame["recall"] == "parts")]
    windows = sorted(chosen["window"].unique())
    fig, axes = plt.subplots(1, max(1, len(windows)), figsize=(5 * max(1, len(windows)), 3.5), squeeze=False)
    for ax, window in zip(axes[0], windows, strict=False):
        table = (chosen[chosen["window"] == window].groupby(["kind", "where"]).size().unstack(fill_value=0)
                 .reindex(columns=list(LOCATIONS), fill_value=0))
        table.plot.bar(stacked=True, ax=ax, rot=0)
        ax.set_title(f"where each fact was at {window:,}")
        ax.set_ylabel("facts")
    fig.tight_layout()
    return fig
