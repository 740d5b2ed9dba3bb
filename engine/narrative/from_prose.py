"""People, places and things the story names, read from its words alone.

The narrative state is the narrator's to propose (a ```state block of typed
events); a small narrator does not follow that protocol (the embedded 135M
model wrote no block in a 13-turn evening at the player's table), and the
State panel then said "Nothing recorded yet" over a story that had named a
keeper, Mara, a lamp room and a key. This reads what the prose itself names,
for a reader to see; it is never the authoritative state and nothing here
writes it: a reader who wants one of these in the state says so with a
correction.

The reading is plain text rules, no model:

- a **person** is a capitalised name used inside a sentence (not only as
  its first word), or a word after a title ("the keeper"), or someone said
  to speak ("Mara says");
- a **place** is a capitalised name after "in", "at", "to", "from", "into"
  or "towards", or "the <word> <place word>" ("the lamp room");
- a **thing** is "the/a/an <word>" right after a verb of handling ("takes
  the key", "finds a letter") or of seeing ("sees a lantern").

Each name comes with how many times the story uses it, most-used first.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Sketch", "sketch"]

# At most this many of each kind are kept: a panel, not an index.
LIMIT = 12

_NOT_NAMES = frozenset(
    "I You Your He She It We They His Her Its Our Their The A An This That These Those There Here Then When "
    "What Who Why How Where Yes No Not And But Or If So As At In On Of To For From With By Into Onto Upon After "
    "Before Behind Beyond Beside Above Below Under Over Through Outside Inside Somewhere Someone Something Nothing "
    "Everyone Everything Anyone Anything Each Every Some Any All Both Once Now Still Just Only Even Perhaps Maybe "
    "Suddenly Slowly Quickly Finally Again Later Soon Meanwhile Mr Mrs Ms Dr Sir Lady Lord Captain King Queen "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July "
    "August September October November December God Oh Ah Hey Story Memories Lines Reminder Now Hard".split())
_TITLES = ("keeper", "innkeeper", "captain", "priest", "priestess", "guard", "guards", "sailor", "fisherman",
           "fishermen", "merchant", "stranger", "old man", "old woman", "woman", "man", "girl", "boy", "child",
           "lighthouse keeper", "harbour master", "harbor master", "doctor", "witch", "knight", "king", "queen",
           "soldier", "smith", "blacksmith", "lamplighter", "ferryman", "abbot", "monk", "nun", "mayor", "widow")
_PLACE_WORDS = ("room", "hall", "tower", "stair", "stairs", "stairway", "door", "cellar", "chapel", "church",
                "harbour", "harbor", "inn", "tavern", "quay", "gate", "cliff", "cliffs", "lighthouse", "beach",
                "shore", "village", "town", "house", "kitchen", "library", "crypt", "cave", "forest", "wood",
                "woods", "road", "street", "market", "square", "bridge", "river", "lake", "sea", "path", "garden",
                "yard", "courtyard", "gallery", "landing", "attic", "basement", "vault", "well", "mill", "dock",
                "docks", "pier", "castle", "keep", "temple", "shrine", "camp", "ship", "deck", "hold", "cabin")
_SPEECH = ("says", "said", "asks", "asked", "whispers", "whispered", "shouts", "shouted", "replies", "replied",
           "answers", "answered", "mutters", "muttered", "calls", "called", "cries", "cried", "laughs", "laughed",
           "nods", "nodded", "smiles", "smiled", "looks", "looked", "turns", "turned", "waits", "waited")
_HANDLING = ("take", "takes", "took", "taken", "hold", "holds", "held", "carry", "carries", "carried", "find",
             "finds", "found", "pick up", "picks up", "picked up", "grab", "grabs", "grabbed", "open", "opens",
             "opened", "give", "gives", "gave", "hand", "hands", "handed", "drop", "drops", "dropped", "light",
             "lights", "lit", "see", "sees", "saw", "notice", "notices", "noticed", "unlock", "unlocks",
             "unlocked", "read", "reads", "pocket", "pockets", "pocketed", "draw", "draws", "drew", "lift",
             "lifts", "lifted", "clutch", "clutches", "clutched", "show", "shows", "showed")
_NOT_THINGS = frozenset("way moment time while room door stair light dark darkness air wind rain sound silence "
                        "voice edge end top bottom side rest story passage night day morning evening one other "
                        "same first last next back front way".split())

_FUNCTION = frozenset("on in at of to from with by for and or but the a an as into onto off up down out over "
                      "under behind beside near than that this which who is are was were be".split())
_WORD = r"[A-Z][a-z’'-]+"
_NAME = re.compile(rf"\b({_WORD}(?:\s+{_WORD})?)\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?…][\"'”’)]*\s+|\n)[\"“]?$")
_TITLE = re.compile(r"\bthe\s+(" + "|".join(sorted(_TITLES, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_SPEAKER = re.compile(rf"\b({_WORD})\s+(?:{'|'.join(_SPEECH)})\b")
_PLACE_NAME = re.compile(rf"\b(?:in|at|to|from|into|towards|toward|near|reach|reaches|reached)\s+({_WORD}"
                         rf"(?:\s+{_WORD})?)\b")
_PLACE = re.compile(r"\bthe\s+((?:[a-z’'-]+\s+)?(?:" + "|".join(sorted(_PLACE_WORDS, key=len, reverse=True))
                    + r"))\b", re.IGNORECASE)
_THING = re.compile(r"\b(?:" + "|".join(sorted(_HANDLING, key=len, reverse=True))
                    + r")\s+(?:the|a|an|his|her|their|your|its)\s+((?:[a-z’'-]+\s+)?[a-z’'-]+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Sketch:
    """What the story's words name: (name, times used) pairs, most used first."""

    people: list[tuple[str, int]] = field(default_factory=list)
    places: list[tuple[str, int]] = field(default_factory=list)
    things: list[tuple[str, int]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.people or self.places or self.things)


def _inside_sentence(text: str, start: int) -> bool:
    return not _SENTENCE_START.search(text[max(0, start - 6):start] if start else "")


def _clean(name: str) -> str:
    words = [w for w in name.split() if w not in _NOT_NAMES]
    return " ".join(words)


def sketch(texts: Iterable[str], known: Iterable[str] = ()) -> Sketch:
    """People, places and things `texts` (the narrations, oldest first) name.
    `known` names (the protagonist's, say) count as people when they appear."""
    texts = [t for t in texts if t]
    whole = "\n\n".join(texts)
    people, places, things = Counter(), Counter(), Counter()
    place_names: set[str] = set()
    for match in _PLACE_NAME.finditer(whole):
        name = _clean(match.group(1))
        if name:
            place_names.add(name)
            places[name] += 1
    for match in _PLACE.finditer(whole):
        places["the " + match.group(1).lower()] += 1
    for match in _NAME.finditer(whole):
        name = _clean(match.group(1))
        if name and name not in place_names and _inside_sentence(whole, match.start()):
            people[name] += 1
    for match in _SPEAKER.finditer(whole):
        name = _clean(match.group(1))
        if name and name not in place_names and name not in people:
            people[name] += 1
    for match in _TITLE.finditer(whole):
        people["the " + match.group(1).lower()] += 1
    for name in known:
        first = (name or "").split(",")[0].strip()
        if first and first in whole and first not in people:
            people[first] = whole.count(first)
    for match in _THING.finditer(whole):
        words = match.group(1).lower().split()
        while words and words[-1] in _FUNCTION:  # "a letter on" is a letter
            words.pop()
        if not words or words[-1] in _NOT_THINGS or words[-1] in _PLACE_WORDS:
            continue
        things[" ".join(words)] += 1
    # A name seen elsewhere at a sentence's start counts there too.
    for name in list(people):
        if not name.startswith("the "):
            people[name] = max(people[name], len(re.findall(rf"\b{re.escape(name)}\b", whole)))
    return Sketch(_top(people), _top(places), _top(things))


def _top(counts: Counter) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:LIMIT]
