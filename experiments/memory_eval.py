"""Memory of a long conversation: does the prompt hold the answer once the
line that said it has left the history window?

Three long conversations of the project's own making (`CONVERSATIONS`:
several named speakers, dated sessions, facts planted among chit-chat, 300+
turns each) are played into a workbench file one turn at a time, every line
given as text (`Name: "…"`), so what is measured is memory, not a narrator's
prose; the memories and summaries are written after every turn by the
configured narrator, as in play (its replies cached in the work folder).
A LoCoMo-format file the user supplies plays the same way (`locomo`; the
benchmark is not shipped: its licence is non-commercial).

Each question (single-hop, multi-hop, temporal, unanswerable, with the
lines that answer it labelled) is asked once, as a dry run of the next
turn in Story mode (`camp.context(question, mode="story")`), and the prompt
is searched for the answer. Beside it, at the same token share as the
project's memories and summary took in that prompt, two baselines over the
raw lines that left the window: BM25 top-k (`rank_bm25`) and dense top-k
(the embedder's cosine), each keeping the history section the prompt had.

Constants (the recall floor) are chosen on the tuning half (even question
index) and reported on the held-out half (odd).
"""
from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from engine import Workbench
from engine.budget import tokens
from engine.context import MEMORY_SECTIONS, Report
from engine.memory.bank import embed_pending, evict, write_due_memories
from engine.memory.facts import copies
from engine.memory.guard import GROUNDED_SHARE, terms
from engine.memory.lines import embed_story
from engine.memory.summary import summarise_if_due
from engine.memory.when import fmt
from engine.providers import Text
from engine.search import DEFAULT, STOP_WORDS
from engine.store import CampaignRow
from engine.story import StoryTree

__all__ = ["CONVERSATIONS", "KINDS", "Conversation", "Silent", "Question", "Played", "CachingNarrator", "baseline_lines",
           "conversation", "evaluate", "half_of", "held_out_table", "load_locomo", "play", "plot_by_distance",
           "plot_by_kind", "probe", "summarise", "tune_floor", "memory_quality", "WINDOW"]

KINDS = ("single-hop", "multi-hop", "temporal", "unanswerable")
WINDOW = 4096
LOCOMO_KINDS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "unanswerable"}


@dataclass(frozen=True)
class Question:
    key: str
    kind: str
    question: str
    answer: str  # "" for an unanswerable question
    evidence: tuple[str, ...]  # line ids


@dataclass(frozen=True)
class Conversation:
    title: str
    speakers: tuple[str, ...]
    lines: tuple[tuple[str, str, str], ...]  # (line id, speaker or "" for a session line, text)
    questions: tuple[Question, ...]


def half_of(index: int) -> str:
    return "tune" if index % 2 == 0 else "held_out"


# ------------------------------------------------------------------ the conversations
FILLER = (
    "How has your week been?", "Not bad, just busy with the usual things.", "That sounds lovely, honestly.",
    "The weather has been grey all week here.", "I made soup last night, nothing fancy.",
    "Work was quiet for once, which was nice.", "Ha, that is so like you.", "I know what you mean.",
    "We should catch up more often.", "I watched a film on Sunday, it was fine, a bit long.",
    "My neighbour's dog barked all morning again.", "I have been trying to sleep earlier.",
    "Did you see the news about the trains?", "Same here, it has been a slow few days.",
    "I could really use a holiday.", "Thanks, that means a lot.", "Anyway, enough about me.",
    "I have been drinking far too much coffee.", "The garden is a mess but I like it that way.",
    "Talk soon, take care of yourself.", "That made me laugh.", "I am glad you are doing well.",
)
# Chit-chat on the planted facts' topics without their answers, as a real
# conversation has: a retriever that matches topic words alone meets these.
DISTRACTORS = (
    "My friend's dog keeps chewing the sofa.", "I keep thinking about getting a pet one day.",
    "Work has been exhausting this month.", "I might look for a new job next year.",
    "I would love to travel somewhere warm.", "Trips are so expensive right now.",
    "My family is coming over for dinner on Sunday.", "I used to play the piano as a kid.",
    "I should really start running again.", "I have a stack of books I never finish.",
    "Our office moved to a new building.", "My cousin keeps sending me photos of their cat.",
    "We talked about opening a little shop once, just a dream.", "I ran for the bus and still missed it.",
    "I read half a novel on the train and forgot the title.", "The city is so crowded in summer.",
)
ANIMALS = ("puppy", "kitten", "rabbit", "parrot", "tortoise", "ferret")
PET_NAMES = ("Biscuit", "Pepper", "Juniper", "Mochi", "Waffles", "Clementine", "Rocket", "Hazel", "Pickle")
COMPANIES = ("Brightwater Labs", "Kestrel Logistics", "Orchard Health", "Lumen Print", "Harbor & Vine",
             "Tallow Studio", "Northgate Bank", "Quarry Games")
ROLES = ("data analyst", "night nurse", "sous chef", "site surveyor", "copy editor", "bus mechanic",
         "school librarian", "sound engineer")
CITIES = ("Porto", "Tallinn", "Kyoto", "Valparaiso", "Ljubljana", "Hobart", "Marrakesh", "Reykjavik", "Cork",
          "Antwerp", "Trieste", "Halifax")
LANDMARKS = ("old harbour", "castle walls", "night market", "botanical garden", "cathedral", "lighthouse")
RELATIONS = ("sister", "brother", "cousin", "aunt", "uncle")
RELATIVES = ("Lena", "Marco", "Tessa", "Jonah", "Ines", "Ravi", "Odile", "Bruno", "Greta", "Idris")
BUSINESSES = ("bakery", "bike repair shop", "bookshop", "pottery studio", "tea room", "record shop")
INSTRUMENTS = ("cello", "banjo", "trumpet", "harp", "accordion", "ukulele", "bassoon")
RACES = ("Riverside half marathon", "Harbour 10k", "Hill Park fun run", "Canal Trail 15k")
TIMES = ("1 hour 52 minutes", "48 minutes", "37 minutes", "1 hour 21 minutes", "55 minutes")
BOOKS = ("The Salt Orchard", "A Field of Lanterns", "Nine Bridges", "The Quiet Engine", "Paper Tides")


def _session_date(start: date, session: int, rng: random.Random) -> date:
    return start + timedelta(days=session * 9 + rng.randint(0, 5))


def conversation(title: str, speakers: Sequence[str], *, turns: int = 320, sessions: int = 12, seed: int = 0,
                 start: date = date(2023, 3, 4), plants_per_session: int = 5) -> Conversation:
    """A long conversation of `turns` turns (two lines each) over dated
    sessions, with facts planted among chit-chat and questions about them.
    Seeded: the same arguments make the same conversation."""
    rng = random.Random(f"{title}:{seed}")
    speakers = tuple(speakers)
    per_session = max(4, (2 * turns) // sessions)
    lines: list[tuple[str, str, str]] = []
    questions: list[Question] = []
    pools = {name: list(pool) for name, pool in (("pet", PET_NAMES), ("company", COMPANIES), ("role", ROLES),
                                                 ("city", CITIES), ("relative", RELATIVES),
                                                 ("business", BUSINESSES), ("instrument", INSTRUMENTS),
                                                 ("race", RACES), ("time", TIMES), ("book", BOOKS),
                                                 ("animal", ANIMALS), ("landmark", LANDMARKS),
                                                 ("relation", RELATIONS))}
    for pool in pools.values():
        rng.shuffle(pool)

    def take(name):
        pool = pools[name]
        value = pool.pop(0)
        pool.append(value)
        return value

    families: dict[str, tuple[str, str, str, str]] = {}  # speaker -> (line id, relation, name, city)
    told: dict[str, list[str]] = {s: [] for s in speakers}
    kinds = ("pet", "job", "trip", "family", "business", "instrument", "race", "book")
    # Each speaker never tells two kinds of fact: asked about them, the questions are unanswerable.
    never = {s: (kinds[(2 * i) % 8], kinds[(2 * i + 5) % 8]) for i, s in enumerate(speakers)}
    once = ("family", "business", "instrument", "job")
    planted: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for session in range(sessions):
        day = _session_date(start, session, rng)
        sid = f"S{session + 1}"
        lines.append((f"{sid}:0", "", f"Session {session + 1}. {rng.choice(['10:15 am', '2:40 pm', '7:05 pm'])} "
                                      f"on {fmt(day)}."))
        plants = rng.sample(range(2, per_session - 2), k=min(plants_per_session, per_session - 4))
        for i in range(1, per_session):
            speaker = speakers[(i + session) % len(speakers)]
            lid = f"{sid}:{i}"
            options = [k for k in kinds if k not in never[speaker] and not (k in once and k in told[speaker])
                       and (k != "business" or speaker in families)]
            if i not in plants or not options:
                lines.append((lid, speaker, rng.choice(DISTRACTORS if rng.random() < 0.35 else FILLER)))
                continue
            kind = rng.choice(options)
            told[speaker].append(kind)
            text, asked = _plant(kind, speaker, lid, day, take, families, rng)
            lines.append((lid, speaker, text))
            questions.extend(asked)
            planted.setdefault((speaker, kind), []).append((lid, asked[0].answer))
    # Multi-hop without the speaker's name: one line says who, another what.
    for speaker in speakers:
        pets, trips = planted.get((speaker, "pet"), []), planted.get((speaker, "trip"), [])
        jobs, races = planted.get((speaker, "job"), []), planted.get((speaker, "race"), [])
        if len(trips) == 1:
            for lid, pet in pets:
                questions.append(Question(f"{lid}:hop:trip", "multi-hop", f"Which city did {pet}'s owner visit?",
                                          trips[0][1], (lid, trips[0][0])))
        if len(jobs) == 1:
            for lid, time in races:
                questions.append(Question(f"{lid}:hop:job", "multi-hop",
                                          f"Which company employs the person who finished a race in {time}?",
                                          jobs[0][1], (lid, jobs[0][0])))
    for speaker in speakers:
        for kind in never[speaker]:
            for ask in _unanswerable(kind, speaker, take):
                questions.append(Question(f"{title}:none:{speaker}:{kind}:{len(questions)}", "unanswerable", ask,
                                          "", ()))
    seen, unique = set(), []
    for q in questions:
        if q.question not in seen:
            seen.add(q.question)
            unique.append(q)
    return Conversation(title, speakers, tuple(lines), tuple(unique))


def _unanswerable(kind: str, speaker: str, take) -> list[str]:
    """Questions about a kind of fact `speaker` never told."""
    return {"pet": [f"What did {speaker} call the new {take('animal')}?", f"When did {speaker} bring the new pet home?"],
            "job": [f"Which company hired {speaker} as a {take('role')}?", f"When did {speaker} begin the new job?"],
            "trip": [f"Where was {speaker}'s trip with the unforgettable {take('landmark')}?",
                     f"When did {speaker} return from the trip?"],
            "family": [f"In which city is {speaker}'s {take('relation')} based?",
                       f"What is the name of {speaker}'s {take('relation')}?"],
            "business": [f"What kind of place did {speaker}'s {take('relation')} start?",
                         f"In which city is the shop {speaker}'s family opened?"],
            "instrument": [f"What is {speaker} learning to play?", f"How long has {speaker} had music lessons?"],
            "race": [f"How long did {speaker} take to finish the {take('race')}?",
                     f"On what date did {speaker} run a race?"],
            "book": [f"What was the title of the novel {speaker} finished?",
                     f"When did {speaker} finish the last novel?"]}[kind]


def _plant(kind, speaker, lid, day, take, families, rng) -> tuple[str, list[Question]]:
    key = f"{lid}:{kind}"
    if kind == "pet":
        animal, pet = take("animal"), take("pet")
        return (f"I adopted a {animal} yesterday, we named her {pet}.",
                [Question(f"{key}:name", "single-hop", f"What did {speaker} call the new {animal}?", pet, (lid,)),
                 Question(f"{key}:when", "temporal", f"When did {speaker} bring {pet} home?",
                          fmt(day - timedelta(days=1)), (lid,))])
    if kind == "job":
        company, role = take("company"), take("role")
        return (f"I started a new job at {company} as a {role}.",
                [Question(f"{key}:where", "single-hop", f"Which company hired {speaker} as a {role}?", company,
                          (lid,)),
                 Question(f"{key}:when", "temporal", f"When did {speaker} begin working for {company}?",
                          fmt(day), (lid,))])
    if kind == "trip":
        city, landmark = take("city"), take("landmark")
        return (f"I got back from {city} yesterday, the {landmark} there was unforgettable.",
                [Question(f"{key}:city", "single-hop", f"Where was {speaker}'s trip with the unforgettable {landmark}?",
                          city, (lid,)),
                 Question(f"{key}:when", "temporal", f"When did {speaker} return from {city}?",
                          fmt(day - timedelta(days=1)), (lid,))])
    if kind == "family":
        relation, relative, city = take("relation"), take("relative"), take("city")
        families[speaker] = (lid, relation, relative, city)
        return (f"My {relation} {relative} lives in {city} now.",
                [Question(f"{key}:where", "single-hop", f"In which city is {speaker}'s {relation} {relative} based?", city,
                          (lid,))])
    if kind == "business":
        first, relation, relative, city = families[speaker]
        business = take("business")
        return (f"{relative} just opened a {business}, I am so proud.",
                [Question(f"{key}:what", "multi-hop", f"What kind of place did {speaker}'s {relation} start?", business,
                          (first, lid)),
                 Question(f"{key}:city", "multi-hop", f"In which city is the {business} that {speaker}'s {relation} started?",
                          city, (first, lid))])
    if kind == "instrument":
        instrument = take("instrument")
        months = rng.choice(("two", "three", "five", "seven"))
        return (f"I have been learning the {instrument} for {months} months now.",
                [Question(f"{key}:what", "single-hop", f"What is {speaker} learning to play?", instrument,
                          (lid,))])
    if kind == "race":
        race, time = take("race"), take("time")
        return (f"Today I ran the {race} and finished in {time}.",
                [Question(f"{key}:time", "single-hop", f"How long did {speaker} take to finish the {race}?", time, (lid,)),
                 Question(f"{key}:when", "temporal", f"On what date did {speaker} race in the {race}?", fmt(day), (lid,))])
    book = take("book")
    return (f"I finished reading {book} last night, the ending wrecked me.",
            [Question(f"{key}:book", "single-hop", f"What was the title of the novel {speaker} finished?", book, (lid,)),
             Question(f"{key}:when", "temporal", f"When did {speaker} get to the end of {book}?",
                      fmt(day - timedelta(days=1)), (lid,))])


def conversations(turns: int = 320) -> list[Conversation]:
    return [conversation("Harbour Street", ("Dana", "Omar", "Lucia"), turns=turns, seed=1),
            conversation("The Night Shift", ("Priya", "Tom", "Grace", "Felix"), turns=turns, seed=2,
                         start=date(2024, 1, 10)),
            conversation("Allotment Club", ("Rosa", "Ben", "Ida"), turns=turns, seed=3, start=date(2022, 9, 2))]


CONVERSATIONS = ("Harbour Street", "The Night Shift", "Allotment Club")


def load_locomo(path: str | Path) -> list[Conversation]:
    """Conversations of a LoCoMo-format JSON file: a list of samples, each with
    `conversation` (`speaker_a`, `speaker_b`, `session_N` lists of
    {speaker, dia_id, text} and `session_N_date_time`) and `qa` ({question,
    answer, evidence, category})."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for n, sample in enumerate(data if isinstance(data, list) else [data]):
        talk = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in talk if re.fullmatch(r"session_\d+", k))
        lines, speakers = [], []
        for number in numbers:
            when = talk.get(f"session_{number}_date_time", "")
            lines.append((f"D{number}:0", "", f"Session {number}. {when}."))
            for turn in talk[f"session_{number}"]:
                lines.append((turn["dia_id"], turn["speaker"], turn["text"]))
                if turn["speaker"] not in speakers:
                    speakers.append(turn["speaker"])
        questions = []
        for i, qa in enumerate(sample.get("qa", [])):
            kind = LOCOMO_KINDS.get(qa.get("category"), "single-hop")
            answer = "" if kind == "unanswerable" else str(qa.get("answer", ""))
            questions.append(Question(f"locomo{n}:{i}", kind, qa["question"], answer,
                                      tuple(str(e) for e in qa.get("evidence", []))))
        out.append(Conversation(sample.get("sample_id", f"LoCoMo {n + 1}"), tuple(speakers), tuple(lines),
                                tuple(questions)))
    return out


# ------------------------------------------------------------------ playing
class Silent:
    """A narrator that answers memory and summary requests with nothing:
    `narrator="none"` measures the memory made from the lines alone (facts
    made from each block's lines, extractive summaries), in minutes rather
    than the hours the embedded narrator takes on a busy 2-core machine."""

    model_id = "none"

    def context_window(self):
        from engine.providers.window import LOADED, Window

        return Window(8192, LOADED, detail="writes nothing", reachable=True)

    def execute(self, prompt):
        yield Text("")


class CachingNarrator:
    """The configured narrator for memory and summary requests, its replies
    kept in a JSON file: a run made again (or with another floor) asks the
    model nothing it asked before."""

    def __init__(self, narrator, path: Path):
        self.narrator, self.path = narrator, path
        self.model_id = narrator.model_id
        self.cache = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.calls = 0

    def context_window(self):
        return self.narrator.context_window()

    def execute(self, prompt):
        key = json.dumps([prompt.system, prompt.story, prompt.max_tokens, getattr(prompt, "task", "")])
        if key not in self.cache:
            self.calls += 1
            self.cache[key] = "".join(c.text for c in self.narrator.execute(prompt) if isinstance(c, Text))
        yield Text(self.cache[key])

    def save(self) -> None:
        self.path.write_text(json.dumps(self.cache), encoding="utf-8")


@dataclass
class Played:
    wb: Workbench
    camp: object
    talk: Conversation
    depth_of: dict = field(default_factory=dict)  # line id -> node depth
    memory_log: list = field(default_factory=list)
    summaries: int = 0
    model_calls: int = 0
    raw: list = field(default_factory=list)  # (depth, line as stored), filled when first asked


def _line_text(speaker: str, text: str) -> str:
    return f'{speaker}: "{text}"' if speaker else text


def play(talk: Conversation, path: str | Path, *, narrator="local", embedder: str = "local",
         cache: Path | None = None, reuse: bool = False, progress: bool = True) -> Played:
    """`talk` written into a fresh workbench file as alternating input and
    reply nodes (a session line as Story-mode prose), with the derived work
    a player has after every turn done by `narrator`."""
    path = Path(path)
    log_path = path.with_suffix(".log.json")
    if reuse and path.exists() and log_path.exists():
        saved = json.loads(log_path.read_text(encoding="utf-8"))
        if saved.get("title") == talk.title and saved.get("lines") == len(talk.lines):
            wb = Workbench.open(path, background=False)
            wb.configure(narrator=Silent() if narrator == "none" else narrator, embedder=embedder)
            return Played(wb, wb.campaign(saved["campaign_id"]), talk, saved["depth_of"], saved["memory_log"],
                          saved.get("summaries", 0), 0)
    narrator = Silent() if narrator == "none" else narrator
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    wb = Workbench.open(path, background=False)
    wb.configure(narrator=narrator, embedder=embedder)
    camp = wb.new_campaign(talk.title, premise="A long conversation between friends, over many sessions.",
                           protagonist="", opening=f"{', '.join(talk.speakers)} keep in touch.")
    talker = CachingNarrator(wb.narrator, cache or path.with_suffix(".narrator.json"))
    out = Played(wb, camp, talk)
    summaries: list = []
    pairs = [talk.lines[i:i + 2] for i in range(0, len(talk.lines), 2)]
    for n, pair in enumerate(tqdm(pairs, desc=talk.title, disable=not progress)):
        with wb.db.writing() as s:
            campaign = s.get(CampaignRow, camp.id)
            tree = StoryTree(s, campaign)
            state = dict(campaign.state or {})
            for (lid, speaker, text), kind in zip(pair, ("player", "narrator"), strict=False):
                stored = _line_text(speaker, text)
                node = tree.append(kind, f"> {stored}" if kind == "player" and speaker else stored, state)
                out.depth_of[lid] = node.depth
        write_due_memories(wb.db, camp.id, talker, log=out.memory_log)
        summarise_if_due(wb.db, camp.id, talker, log=summaries)
        embed_pending(wb.db, camp.id, wb.embedder)
        embed_story(wb.db, camp.id, wb.embedder)
        evict(wb.db, camp.id, wb.settings.memory_capacity)
        if n % 20 == 0:
            talker.save()
    while embed_pending(wb.db, camp.id, wb.embedder) or embed_story(wb.db, camp.id, wb.embedder):
        pass
    talker.save()
    out.summaries, out.model_calls = len(summaries), talker.calls
    log_path.write_text(json.dumps({"title": talk.title, "campaign_id": camp.id, "lines": len(talk.lines),
                                    "depth_of": out.depth_of, "memory_log": out.memory_log,
                                    "summaries": out.summaries}), encoding="utf-8")
    return out


# ------------------------------------------------------------------ asking
def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", (text or "").lower()))


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP_WORDS]


def baseline_lines(played: Played, question: str, before: int, budget: int, method: str,
                   vectors: dict | None = None) -> list[str]:
    """The raw lines (shallower than `before`) a plain retriever would add
    within `budget` tokens: BM25 (`rank_bm25.BM25Okapi`) or the embedder's
    cosine, best first."""
    from rank_bm25 import BM25Okapi

    texts = [(d, t) for d, t in _raw_lines(played) if d < before]
    if not texts or budget <= 0:
        return []
    if method == "bm25":
        bm25 = BM25Okapi([_words(t) or ["_"] for _, t in texts])
        scores = bm25.get_scores(_words(question))
    else:
        vectors = vectors if vectors is not None else {}
        missing = [t for _, t in texts if t not in vectors]
        if missing:
            for text, row in zip(missing, played.wb.embedder.embed(missing), strict=True):
                vectors[text] = row / (np.linalg.norm(row) or 1.0)
        query = played.wb.embedder.embed([question])[0]
        query = query / (np.linalg.norm(query) or 1.0)
        scores = np.array([float(vectors[t] @ query) for _, t in texts])
    out, spent = [], 0
    for i in np.argsort(-np.asarray(scores), kind="stable"):
        cost = tokens.count(texts[i][1]) + 1
        if spent + cost > budget:
            continue
        out.append(texts[i][1])
        spent += cost
    return out


def _raw_lines(played: Played) -> list[tuple[int, str]]:
    if not played.raw:
        by_id = {lid: (speaker, text) for lid, speaker, text in played.talk.lines}
        played.raw = sorted((d, _line_text(*by_id[lid])) for lid, d in played.depth_of.items())
    return played.raw


def _holds(text: str, question: Question, evidence_texts: Sequence[str]) -> bool:
    """Whether `text` holds the answer: the answer itself (normalised), or
    for a free-form answer every evidence line."""
    body = _norm(text)
    if question.answer and _norm(question.answer) in body:
        return True
    return bool(evidence_texts) and all(_norm(e) in body for e in evidence_texts) and not _dated(question)


def _dated(question: Question) -> bool:
    return question.kind == "temporal"


def probe(played: Played, tuning=None, window: int = WINDOW, keys: Sequence[str] | None = None,
          baselines: bool = True, chained: bool = False) -> pd.DataFrame:
    """One row per question: where its evidence stands against the history
    window, whether the project's prompt holds the answer (and from which
    unit), and whether each baseline's lines at the same token share do.
    `chained`: each question is asked as the turn after the one before,
    its prompt holding the summary and memories that one's prompt chose
    (the story does not move between questions, so only a rewritten
    summary, a unit gone or a best unit that does not fit renews them)."""
    wb, camp, talk = played.wb, played.camp, played.talk
    wb.configure(context_budget=window, n_ctx=max(window, 4096), tuning=tuning or DEFAULT)
    by_id = {lid: (speaker, text) for lid, speaker, text in talk.lines}
    rows, vectors, held = [], {}, {}
    for index, q in enumerate(talk.questions):
        if keys is not None and q.key not in keys:
            continue
        depths = [played.depth_of[e] for e in q.evidence if e in played.depth_of]
        report = Report(camp.context(q.question, mode="story", held=held if chained else None))
        held = dict(report.get("held") or {})
        history_text = report.history_text
        oldest = report["history"]["total"] - report["history"]["included"]
        evidence = [_line_text(*by_id[e]) for e in q.evidence if e in by_id]
        live = [s for s in report.sections if s.name in (*MEMORY_SECTIONS, "story_summary")]
        share = sum(s.tokens for s in live)
        prompt = report["story"]
        where = "nowhere"
        if q.answer or evidence:
            if _holds(history_text, q, evidence):
                where = "history"
            else:
                unit = _unit_holding(report, q, evidence)
                if unit is not None:
                    where = unit
                elif any(s.name == "story_summary" and _holds(s.text, q, evidence) for s in live):
                    where = "summary"
                elif _holds(prompt, q, evidence):
                    where = "elsewhere"
        row = {"conversation": talk.title, "question": q.key, "kind": q.kind, "half": half_of(index),
               "evidence_depth": min(depths) if depths else None, "window_start": oldest,
               "left_window": bool(depths) and max(depths) < oldest,
               "distance": (oldest - max(depths)) if depths else None,
               "share_tokens": share, "where": where, "project": where != "nowhere",
               "offered": sum(1 for u in report.used("memories") if u.get("unit", "memory") != "memory"),
               "invented": _invented(report, played) if q.kind == "unanswerable" else 0}
        if baselines and (q.answer or evidence):
            for method in ("bm25", "dense"):
                got = baseline_lines(played, q.question, oldest, share, method, vectors)
                row[method] = _holds(history_text + "\n" + "\n".join(got), q, evidence)
        rows.append(row)
    return pd.DataFrame(rows)


def _unit_holding(report: Report, question: Question, evidence: Sequence[str]) -> str | None:
    """Which kind of recalled unit in the memories section holds the answer:
    "memory", "line" or "summary" (a turn's report keeps a memory's text; a
    line's and a summary's are read from the section, one per item)."""
    shown = report.memories_text
    if not shown:
        return None
    memories = {u.get("text", "") for u in report.used("memories") if u.get("unit", "memory") == "memory"}
    for item in shown.split("\n- ")[1:] if "\n- " in shown else []:
        if not _holds(item, question, evidence):
            continue
        bare = item.removeprefix("[inferred] ")
        if bare in memories:
            return "memory"
        return "summary" if item.startswith(("[story to ", "[earlier summary]")) else "line"
    return None


def _invented(report: Report, played: Played) -> int:
    """Memories in the prompt whose words are mostly not the story's (a
    memory the model made up): what an unanswerable question must not bring."""
    story = frozenset().union(*(terms(t) for _, t in _raw_lines(played)))
    out = 0
    for unit in report.used("memories"):
        if unit.get("unit", "memory") != "memory":
            continue
        said = terms(re.sub(r"\([^)]*\)", "", unit.get("text", "")))
        if said and len(said & story) / len(said) < GROUNDED_SHARE:
            out += 1
    return out


def evaluate(workdir: str | Path, *, turns: int = 320, narrator="local", embedder: str = "local",
             locomo: str = "", reuse: bool = True, progress: bool = True,
             count: int = 3) -> list[Played]:
    """Play the conversations (and a LoCoMo file's, when given) into `workdir`."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    talks = conversations(turns)[:count] + (load_locomo(locomo) if locomo else [])
    out = []
    for talk in talks:
        name = re.sub(r"\W+", "_", talk.title.lower()).strip("_")
        model = narrator if isinstance(narrator, str) else getattr(narrator, "model_id", "narrator")
        tag = "" if model == "local" else "-" + re.sub(r"\W+", "_", model)  # banks of other narrators apart
        out.append(play(talk, workdir / f"{name}-{len(talk.lines)}{tag}.db", narrator=narrator, embedder=embedder,
                        cache=workdir / f"narrator_cache{tag}.json", reuse=reuse, progress=progress))
    return out


def tune_floor(played: Sequence[Played], floors: Sequence[float] = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7),
               window: int = WINDOW) -> pd.DataFrame:
    """Each recall floor on the tuning half: the share of answerable
    questions whose evidence left the window that the prompt answers, the
    lines and summaries offered to an unanswerable question (noise), and
    memories invented for those. Best first: most answered, then least
    noise, then the higher floor."""
    rows = []
    for floor in floors:
        tuning = replace(DEFAULT, recall_floor=floor)
        frames = [probe(p, tuning, window, keys=[q.key for i, q in enumerate(p.talk.questions)
                                                  if half_of(i) == "tune"], baselines=False) for p in played]
        frame = pd.concat(frames, ignore_index=True)
        answerable = frame[(frame.kind != "unanswerable") & frame.left_window]
        unanswerable = frame[frame.kind == "unanswerable"]
        rows.append({"floor": floor, "answered": round(float(answerable.project.mean()), 3) if len(answerable) else None,
                     "questions": len(answerable),
                     "noise": round(float(unanswerable.offered.mean()), 2) if len(unanswerable) else 0.0,
                     "invented": int(frame.invented.sum())})
    return pd.DataFrame(rows).sort_values(["answered", "noise", "floor"], ascending=[False, True, False]
                                          ).reset_index(drop=True)


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """By half and kind, over answerable questions whose evidence left the
    window: the project's share answered beside each baseline's."""
    left = frame[(frame.kind != "unanswerable") & frame.left_window]
    table = left.groupby(["half", "kind"]).agg(questions=("project", "size"), project=("project", "mean"),
                                                bm25=("bm25", "mean"), dense=("dense", "mean"))
    overall = left.groupby("half").agg(questions=("project", "size"), project=("project", "mean"),
                                       bm25=("bm25", "mean"), dense=("dense", "mean"))
    overall["kind"] = "all"
    return pd.concat([table.reset_index(), overall.reset_index()], ignore_index=True).round(3)


def held_out_table(frame: pd.DataFrame) -> dict:
    """The issue's targets on the held-out half."""
    held = frame[frame.half == "held_out"]
    left = held[(held.kind != "unanswerable") & held.left_window]
    project = float(left.project.mean()) if len(left) else None
    baseline = max(float(left.bm25.mean()), float(left.dense.mean())) if len(left) else None
    temporal = left[left.kind == "temporal"]
    unanswerable = held[held.kind == "unanswerable"]
    return {"questions": int(len(left)), "project": _r(project), "bm25": _r(float(left.bm25.mean()) if len(left)
                                                                                 else None),
            "dense": _r(float(left.dense.mean()) if len(left) else None), "better_baseline": _r(baseline),
            "temporal": _r(float(temporal.project.mean()) if len(temporal) else None),
            "unanswerable": int(len(unanswerable)), "invented": int(unanswerable.invented.sum()),
            "where": {k: int(v) for k, v in left[left.project]["where"].value_counts().items()},
            "targets": {"answered >= 60%": project is not None and project >= 0.6,
                        "beats the better baseline by 20 points": project is not None and baseline is not None
                        and project >= baseline + 0.2,
                        "temporal >= 40%": len(temporal) > 0 and float(temporal.project.mean()) >= 0.4,
                        "no invented memory for unanswerable": int(unanswerable.invented.sum()) == 0}}


def _r(x):
    return None if x is None else round(x, 3)


def memory_quality(played: Sequence[Played]) -> pd.DataFrame:
    """Per conversation: memories written, how many the model wrote, and how
    many are a sentence of the story copied (the issue asks for <= 10 %)."""
    rows = []
    for p in played:
        frame = p.camp.memories.frame()
        texts = list(frame["text"])
        sources = [t for _, t in _raw_lines(p)]
        by_model = sum(int(e.get("by_model", 0)) for e in p.memory_log)
        rows.append({"conversation": p.talk.title, "memories": len(texts), "by_model": by_model,
                     "copies": copies(texts, sources),
                     "copied_share": round(copies(texts, sources) / max(1, len(texts)), 3),
                     "summaries": p.summaries, "model_calls": p.model_calls})
    return pd.DataFrame(rows)


def plot_by_kind(frame: pd.DataFrame, half: str = "held_out"):
    import matplotlib.pyplot as plt

    table = summarise(frame) if len(frame) else pd.DataFrame(columns=["half", "kind"])
    table = table[table.half == half].set_index("kind").reindex(columns=["project", "bm25", "dense"])
    if table.empty:  # a short run: no question's evidence has left the window yet
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.text(0.5, 0.5, "no question's evidence has left the window", ha="center", va="center")
        return fig
    ax = table.astype(float).plot.bar(figsize=(7, 3.5), rot=0, color=["#2b6cb0", "#a0aec0", "#718096"])
    ax.set(ylabel="answer in the prompt", ylim=(0, 1), title=f"By kind, {half.replace('_', '-')} half, "
                                                            "evidence outside the window")
    plt.tight_layout()
    return ax.figure


def plot_by_distance(frame: pd.DataFrame, half: str = "held_out", edges=(0, 50, 150, 300, 600, 10_000)):
    import matplotlib.pyplot as plt

    left = frame[(frame.half == half) & (frame.kind != "unanswerable") & frame.left_window].copy() \
        if len(frame) else pd.DataFrame()
    if left.empty:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.text(0.5, 0.5, "no question's evidence has left the window", ha="center", va="center")
        return fig
    left["distance (nodes)"] = pd.cut(left["distance"], list(edges), right=False)
    table = left.groupby("distance (nodes)", observed=True)[["project", "bm25", "dense"]].mean()
    ax = table.plot(marker="o", figsize=(7, 3.5), color=["#2b6cb0", "#a0aec0", "#718096"])
    ax.set(ylabel="answer in the prompt", ylim=(0, 1), title="By distance of the evidence from the window")
    plt.tight_layout()
    return ax.figure
