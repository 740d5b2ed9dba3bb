"""Memories as facts: short standalone statements, the speaker named where
the line said "I", each linked to the line it came from and carrying the
time in force there.

Why: the block memories the guard fell back to were the block's sentences
copied, so a memory of a conversation read "I went to the support group
yesterday" with nobody in it, and of an adventure "Wren, a salvage diver
who owes the keeper a favour say …" (the protagonist's description pasted
in for "You"). A memory is read on its own, much later: it must say who,
what, and when. The 135M narrator is asked for facts first (`FACTS_SYSTEM`)
and each one it writes must be grounded in the block (`check_fact`); the
rest are made here from the lines themselves: a named speaker's "I" becomes
the name (verbs agreeing), "you" in speech becomes the one spoken to, the
protagonist's "you" the protagonist's name, a relative day the date it
means, and a long sentence its most informative clause.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..narrative.prose import first_person
from ..search.stopwords import STOP_WORDS
from .guard import GROUNDED_SHARE, META_PHRASES, salient, sentences, terms
from .when import Stamp, resolve

__all__ = ["FACT_MAX_WORDS", "FACTS_PER_BLOCK", "FACTS_SYSTEM", "Fact", "Said", "check_fact", "copies", "facts_of",
           "facts_request", "normalised", "said_by", "third_person_of"]

# Facts kept per block of six story nodes: a block of a conversation holds
# two to four things worth asking about later; more would crowd the bank
# (its capacity evicts the least recently used).
FACTS_PER_BLOCK = 3
# A fact is one short statement; a longer sentence is cut to its most
# informative clause.
FACT_MAX_WORDS = 30
FACTS_SYSTEM = (
    "You keep the memory of a long story. From the excerpt, write up to three facts a later scene could "
    "turn on, one per line: each a short sentence in the past tense that names who did or said what (and "
    "where or when if the excerpt says). Use names, never 'I', 'you', 'he' or 'she'. Answer with the facts "
    "only, one per line, no numbering and no preamble."
)

_SPEAKER = re.compile(r"^((?:[A-Z][\w'’.-]*)(?:\s+[A-Z][\w'’.-]*){0,2})\s*:\s*(\S.*)$", re.S)
_NOT_SPEAKERS = {"you", "i", "we", "note", "ooc", "story", "chapter", "day", "session", "part"}
_SAY = re.compile(r"^(?:you|i)\s+(?:say|ask|reply|shout|whisper|tell \w+)\s*[,:]?\s*[\"“](.+?)[\"”]?\s*$", re.I)
_QUOTE = re.compile(r"^[\"“'‘]+|[\"”'’]+$")


@dataclass(frozen=True)
class Said:
    """One story line as facts are made from it: who said it (None: narration),
    its words, its depth and the time in force there."""

    depth: int
    speaker: str | None
    words: str
    stamp: Stamp | None = None
    reader: bool = False


@dataclass(frozen=True)
class Fact:
    text: str
    start: int
    end: int
    source: str  # the sentence it was made from ("" for the model's)
    by_model: bool = False


def said_by(depth: int, kind: str, text: str, protagonist: str, stamp: Stamp | None = None) -> Said:
    """Who says a story line: a `Name: "…"` line its Name, the reader's
    `> You say "…"` the protagonist, anything else is narration."""
    text = (text or "").strip()
    reader = kind == "player" and text.startswith(">")
    body = text.lstrip(">").strip()
    found = _SPEAKER.match(body)
    if found and found.group(1).lower() not in _NOT_SPEAKERS:
        return Said(depth, found.group(1), _QUOTE.sub("", found.group(2).strip()), stamp, reader)
    spoken = _SAY.match(body) if reader else None
    if spoken:
        return Said(depth, protagonist or "The player", spoken.group(1).strip(), stamp, reader)
    return Said(depth, None, body, stamp, reader)


# ------------------------------------------------------------------ person
_IRREGULAR = {"am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "was": "was", "were": "was",
              "'m": "is", "'re": "is", "'ve": "has", "'ll": "will", "'d": "would"}
_KEEP = {"can", "could", "will", "would", "shall", "should", "may", "might", "must", "had", "did", "was", "just",
         "really", "also", "always", "never", "still", "actually", "finally", "usually", "often", "sometimes",
         "recently", "already", "even", "only", "once", "then", "too", "not", "definitely", "totally"}
_ADVERBS = {"just", "really", "also", "always", "never", "still", "actually", "finally", "usually", "often",
            "sometimes", "recently", "already", "even", "only", "definitely", "totally", "truly", "both"}
_PAST_IRREGULAR = {"went", "saw", "got", "took", "made", "felt", "found", "thought", "told", "said", "came", "knew",
                   "gave", "bought", "met", "ran", "began", "kept", "left", "lost", "heard", "brought", "built",
                   "caught", "chose", "drew", "drove", "ate", "fell", "fought", "flew", "forgot", "grew", "held",
                   "hid", "led", "lent", "paid", "rode", "rose", "sang", "sat", "slept", "sold", "sent", "spent",
                   "stood", "stole", "swam", "taught", "threw", "understood", "woke", "won", "wore", "wrote", "became",
                   "put", "read", "set", "cut", "let", "hit", "hurt", "quit", "shut", "spoke", "broke", "wanted"}


# Words after a subject that are not its verb ("you the map", "I too"): left as they are.
_NOT_VERBS = {"the", "a", "an", "to", "for", "with", "at", "on", "in", "from", "of", "by", "about", "that", "this",
              "it", "and", "but", "or", "so", "not", "too", "all", "some", "any", "no", "there", "here", "very",
              "much", "more", "most", "well", "back", "up", "down", "out", "off", "over", "again", "his", "her",
              "its", "their", "your", "my", "our", "as", "if", "when", "then", "than", "also", "yet", "alone"}


def _third_verb(word: str) -> str:
    lower = word.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if (lower in _KEEP or lower in _PAST_IRREGULAR or lower.endswith(("ed", "ing")) or not lower.isalpha()
            or lower in _NOT_VERBS):
        return word
    if lower.endswith(("s", "x", "z", "ch", "sh", "o")):
        return word + "es"
    if len(lower) > 2 and lower.endswith("y") and lower[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


_I_VERB = re.compile(r"\b(I|we)('m|'re|'ve|'ll|'d|’m|’re|’ve|’ll|’d)?\s+(\w+)(\s+\w+)?", re.I)
_YOU_VERB = re.compile(r"(?<![\w'’])(you)('re|'ve|'ll|'d|’re|’ve|’ll|’d)?\s+(\w+)(\s+\w+)?", re.I)
# "you" after one of these is an object ("gives you a map", "for you"), not a subject.
_OBJECT_AFTER = {"to", "for", "with", "at", "on", "in", "from", "of", "by", "about", "around", "behind", "toward",
                 "towards", "into", "onto", "near", "past", "beside", "like", "than", "let", "make", "help", "see",
                 "thank", "tell", "give", "ask", "meet", "call", "love", "miss", "know", "got", "get", "want"}


def _agreeing(name: str, match: re.Match) -> str:
    """A subject pronoun and its verb, told about `name`."""
    contraction = (match.group(2) or "").replace("’", "'").lower()
    first, rest = match.group(3), match.group(4) or ""
    lead = match.group(0)[:match.start(1) - match.start(0)]  # what the pattern read before the pronoun
    if contraction:
        return f"{lead}{name} {_IRREGULAR[contraction]} {first}{rest}"
    if first.lower() in _ADVERBS and rest.strip():
        return f"{lead}{name} {first} {_third_verb(rest.strip())}"
    return f"{lead}{name} {_third_verb(first)}{rest}"


def _object(text: str, at: int) -> bool:
    before = re.findall(r"[\w'’]+", text[:at].lower())
    if not before:
        return False
    word = before[-1]
    return word in _OBJECT_AFTER or (word.endswith(("s", "ed")) and word not in ("as", "is", "was", "has", "this",
                                                                                  "does", "thus", "yes"))


def third_person_of(sentence: str, name: str, addressee: str | None = None) -> str | None:
    """`sentence` said by `name`, told about them: "I love it" -> "Caroline
    loves it", "my" -> "Caroline's", "you" -> the one spoken to (None, the
    sentence dropped, when nobody is known to be spoken to)."""
    out = _I_VERB.sub(lambda m: _agreeing(name, m), sentence)
    for pattern, replacement in ((r"\b(?:my|our)\b", f"{name}'s"), (r"\b(?:me|us|myself|ourselves)\b", name),
                                 (r"\bmine\b", f"{name}'s")):
        out = re.sub(pattern, replacement, out, flags=re.IGNORECASE)
    out = re.sub(r"\b(?:I|[Ww]e)\b", name, out)
    if re.search(r"\b(?:you|your|yours|yourself)\b", out, re.I):
        if not addressee:
            return None
        out = _YOU_VERB.sub(lambda m: m.group(0) if _object(out, m.start()) else _agreeing(addressee, m), out)
        out = re.sub(r"\b(?:your|yours)\b", f"{addressee}'s", out, flags=re.I)
        out = re.sub(r"\b(?:you|yourself)\b", addressee, out, flags=re.I)
    out = out.strip()
    return out[:1].upper() + out[1:]


# ------------------------------------------------------------------ choosing
def normalised(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", (text or "").lower()))


_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=—)|\s+-\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.:]*")


def _information(sentence: str, df: Counter, n: int) -> float:
    words = {w.lower().strip("'’") for w in _WORD.findall(sentence)} - STOP_WORDS
    return sum(math.log((n + 1) / (df[w] + 0.5)) for w in words)


def _short(sentence: str, df: Counter, n: int, items: set[str]) -> str:
    """The sentence, or its most informative clauses in order, within FACT_MAX_WORDS."""
    if len(sentence.split()) <= FACT_MAX_WORDS:
        return sentence
    clauses = [c for c in _CLAUSE.split(sentence) if c.strip()]
    ranked = sorted(range(len(clauses)), key=lambda i: -(_information(clauses[i], df, n)
                                                        + 3 * sum(1 for t in items if t in clauses[i].lower())))
    kept, room = set(), FACT_MAX_WORDS
    for i in ranked:
        if len(clauses[i].split()) <= room:
            kept.add(i)
            room -= len(clauses[i].split())
    if not kept:
        return " ".join(sentence.split()[:FACT_MAX_WORDS])
    return " ".join(clauses[i] for i in sorted(kept)).rstrip(",;:—-") 


def _closed(text: str) -> str:
    text = text.strip().rstrip(",;:—-").strip()
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _dated(text: str, stamp: Stamp | None) -> str:
    """The fact with its relative days written out, and the time in force
    when the fact names none."""
    written = resolve(text, stamp)
    if stamp is None or not stamp.label or written != text or stamp.label.lower() in text.lower():
        return written
    return f"{written[:-1] if written.endswith('.') else written} ({stamp.label})."


def facts_of(lines: Sequence[Said], protagonist: str = "", corpus: Sequence[str] = (),
             limit: int = FACTS_PER_BLOCK) -> list[Fact]:
    """The block's most informative statements as standalone facts, in story
    order: questions, greetings and filler give none (a fact needs a name, a
    number or a rare word), and each names its speaker."""
    name = protagonist or "The player"
    speakers = [s.speaker for s in lines]
    candidates: list[tuple[str, str, Said]] = []
    for i, line in enumerate(lines):
        others = {s for s in speakers[max(0, i - 2): i + 3] if s and s != line.speaker}
        addressee = next(iter(others)) if len(others) == 1 else None
        for sentence in sentences(line.words):
            sentence = sentence.strip().strip("\"“”")
            if sentence.endswith("?") or len(terms(sentence)) < 2:
                continue
            if line.speaker is not None:
                told = third_person_of(sentence, line.speaker, addressee or (name if line.speaker != name else None))
            else:
                # Narration: its "you" (and a reader's "I") is the protagonist.
                told = third_person_of(sentence, name, name)
            if told:
                candidates.append((told, sentence, line))
    if not candidates:
        return []
    pool = [{w.lower().strip("'’") for w in _WORD.findall(t)} for t in
            [c[1] for c in candidates] + [s for text in corpus for s in sentences(text)]]
    df = Counter(w for words in pool for w in words)
    n = len(pool)
    items = {i.lower() for i in salient([line.words for line in lines])}

    def weight(told: str, line: Said) -> float:
        named = sum(1 for i in items if i in told.lower())
        return _information(told, df, n) / max(1, len(terms(told))) + 3.0 * named + (1.0 if line.reader else 0.0)

    scored = sorted(range(len(candidates)), key=lambda i: -weight(candidates[i][0], candidates[i][2]))
    chosen, seen = [], []
    for i in scored:
        told, sentence, line = candidates[i]
        words = terms(told)
        if any(len(words & other) >= 0.6 * max(1, min(len(words), len(other))) for other in seen):
            continue
        seen.append(words)
        chosen.append(i)
        if len(chosen) >= limit:
            break
    return [Fact(_dated(_closed(_short(candidates[i][0], df, n, items)), candidates[i][2].stamp),
                 candidates[i][2].depth, candidates[i][2].depth, candidates[i][1]) for i in sorted(chosen)]


# ------------------------------------------------------------------ the model's facts
def facts_request(brief: str, block_texts: Sequence[str]) -> str:
    excerpt = "\n\n".join(block_texts)
    return f"{brief}\n\nStory excerpt:\n\n{excerpt}\n\nFacts:"


def check_fact(fact: str, sources: Sequence[str], protagonist: str = "") -> bool:
    """Whether a fact the model wrote may stand: a statement of five words or
    more, about the story and not the prompt, not in the first or second
    person, whose words are mostly the block's, naming something the block
    names."""
    fact = (fact or "").strip()
    if len(fact.split()) < 5 or len(fact.split()) > FACT_MAX_WORDS or fact.endswith("?"):
        return False
    lowered = fact.lower()
    if any(p in lowered for p in META_PHRASES) or first_person(fact):
        return False
    if re.search(r"\b(?:you|your|yours|yourself)\b", re.sub(r"[\"“][^\"”]*[\"”]", " ", fact), re.I):
        return False
    said = terms(fact)
    grounded = len(said & frozenset().union(terms(protagonist), *(terms(s) for s in sources))) / max(1, len(said))
    if grounded < GROUNDED_SHARE:
        return False
    items = [i for i in salient(list(sources)) if i.lower() != (protagonist or "").lower()]
    return not items or any(i.lower() in lowered for i in items)


def copies(memories: Sequence[str], sources: Sequence[str]) -> int:
    """How many memories are a sentence of `sources` copied (their time
    suffix set aside): the measure the issue's 10 % is of."""
    said = {normalised(s) for text in sources for s in sentences(text)}
    said.discard("")
    out = 0
    for memory in memories:
        bare = normalised(re.sub(r"\s*\([^)]*\)\.?$", "", memory or ""))
        if bare and bare in said:
            out += 1
    return out
