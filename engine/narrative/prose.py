"""The narration's own rules, held by the application: a reply ends at a
sentence end, and narration speaks to "you", never as "I".

A 135M narrator broke both on the defaults (the narration evaluation: 67 % of replies ended
at a sentence end, 58 % were in the second person: "I'm Grimjack, the
tavern's former captain…"). These are plain text functions; the turn runner
decides when to use them and records what it changed.
"""
from __future__ import annotations

import re

from .extract import split

__all__ = ["PROMPT_LABELS", "RULE_PROMPT_LABEL", "cut_to_sentence", "drop_copied", "echoed_prompt",
           "ends_at_sentence", "first_person", "hold_rules", "named_things", "narration_only", "outside_quotes",
           "reply_opening", "second_person", "second_person_changes", "takes_up"]

# A sentence end: . ! ? or … followed by any closing quotes or brackets, then
# whitespace or the end of the text.
_END = re.compile(r"[.!?…][\"'”’)\]*]*(?=\s|$)")
_FINAL = re.compile(r"[.!?…][\"'”’)\]*]*$")
_QUOTE_SPAN = re.compile(r"[\"“][^\"”]*[\"”]|[\"“][^\"”]*$")
_FIRST = re.compile(r"\b(I|I'm|I’m|I've|I’ve|I'll|I’ll|I'd|I’d|me|my|mine|myself)\b")
# Abbreviations whose full stop ends no sentence.
_ABBREVIATIONS = ("Mr.", "Mrs.", "Ms.", "Dr.", "St.", "Mt.")


def outside_quotes(text: str) -> str:
    """`text` with quoted speech (and an unclosed quote to the end) blanked,
    same length, so positions still match."""
    return _QUOTE_SPAN.sub(lambda m: " " * len(m.group()), text or "")


# Words that introduce what someone says: what follows them (to the end of
# the sentence) is their speech, reported without quotes ("The old man says:
# I have seen the black ship."), and keeps its own "I".
_SPEECH_VERBS = ("say", "says", "said", "ask", "asks", "asked", "whisper", "whispers", "whispered", "shout",
                 "shouts", "shouted", "reply", "replies", "replied", "answer", "answers", "answered", "mutter",
                 "mutters", "muttered", "cry", "cries", "cried", "call", "calls", "called", "yell", "yells", "yelled",
                 "murmur", "murmurs", "murmured", "tell", "tells", "told", "write", "writes", "wrote", "read",
                 "reads", "declare", "declares", "declared", "explain", "explains", "explained", "insist",
                 "insists", "insisted", "add", "adds", "added", "continue", "continues", "continued")
_REPORTED = re.compile(r"(?:\b(?:" + "|".join(_SPEECH_VERBS) + r")\b(?:\s+(?:you|him|her|them|me|us))?\s*[:,]?|:)"
                       r"([^.!?…\n]*)", re.IGNORECASE)
# Link text and code are the reader's or the page's, never narration: [click me], `rm -rf`.
_LINK_OR_CODE = re.compile(r"\[[^\[\]\n]*\](?:\([^()\n]*\))?|`[^`\n]*`")


def _kept_spans(text: str) -> list[tuple[int, int]]:
    """Where the first-person repair never writes: quoted speech, speech
    reported after a colon or a speech verb (to the end of its sentence),
    link text and code. Sorted and merged."""
    spans = [m.span() for m in _QUOTE_SPAN.finditer(text)]
    spans += [m.span(1) for m in _REPORTED.finditer(text) if m.group(1).strip()]
    spans += [m.span() for m in _LINK_OR_CODE.finditer(text)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def narration_only(text: str) -> str:
    """`text` with everything the repair must not touch blanked (speech,
    quoted or reported, link text, code), same length."""
    text = text or ""
    out = list(text)
    for start, end in _kept_spans(text):
        out[start:end] = " " * (end - start)
    return "".join(out)


def ends_at_sentence(text: str) -> bool:
    return bool(_FINAL.search((text or "").rstrip()))


def cut_to_sentence(text: str) -> tuple[str, str]:
    """(complete part, cut part): the reply up to its last sentence end, and
    what followed it (kept so Continue can go on from a whole sentence). A
    reply with no sentence end at all is kept whole: there is nothing to cut
    back to, and an empty turn is worse than an unfinished one."""
    text = (text or "").rstrip()
    ends = [m for m in _END.finditer(text) if not text[: m.end()].endswith(_ABBREVIATIONS)]
    if not ends:
        return text, ""
    last = ends[-1]
    kept, tail = text[: last.end()], text[last.end():].strip()
    if not tail:
        return text, ""
    if kept.count('"') % 2 == 1:  # a quote left open by the cut is closed
        kept += '"'
    return kept, tail


def first_person(text: str) -> bool:
    """Narration as "I": outside quoted or reported speech, link text and code."""
    return bool(_FIRST.search(narration_only(text)))


_SWAPS = (
    (r"\bI am\b", "you are"), (r"\bI was\b", "you were"), (r"\bI[’']m\b", "you're"), (r"\bI[’']ve\b", "you've"),
    (r"\bI[’']ll\b", "you'll"), (r"\bI[’']d\b", "you'd"), (r"\bmyself\b", "yourself"), (r"\bmine\b", "yours"),
    (r"\bmy\b", "your"), (r"\bMy\b", "Your"), (r"\bme\b", "you"), (r"\bI\b", "you"),
)


def second_person(text: str) -> str:
    """First-person narration turned to "you": the repair when a model
    narrates as "I". Speech (quoted, or reported after a colon or a speech
    verb), link text and code are left as written. A sentence that begins
    with the swapped word is capitalised again."""
    return second_person_changes(text)[0]


def second_person_changes(text: str) -> tuple[str, list[dict]]:
    """`second_person(text)` and each change it made: {"was", "now"}, the
    words as they stood and as they were written."""
    text = text or ""
    kept = _kept_spans(text)
    pieces, changes, last = [], [], 0
    for start, end in kept + [(len(text), len(text))]:
        part = text[last:start]
        for pattern, replacement in _SWAPS:
            part = re.sub(pattern, lambda m, r=replacement: _note(changes, m.group(), r), part)
        part = re.sub(r"(^|[.!?…]\s+)(you|your)\b", lambda m: m.group(1) + m.group(2).capitalize(), part)
        pieces.append(part)
        pieces.append(text[start:end])
        last = end
    return "".join(pieces), changes


def _note(changes: list[dict], was: str, now: str) -> str:
    changes.append({"was": was, "now": now})
    return now


# A story direction that opens with one of these is an order to the narrator
# ("Make the storm break."), not an event the story can begin with; those are
# left to the restated line in the prompt.
_ORDERS = frozenset(
    "add begin bring change continue cut describe end explain focus give have include introduce kill let make "
    "move narrate remove reveal send show skip start switch take tell write".split())


def reply_opening(kind: str | None, line: str) -> str:
    """The words a reply to `line` starts with, written by the engine for the
    narrator to continue: the player's action in the second person ("You
    light the lantern."), or a direction that states an event ("A storm
    breaks over the harbour."). Empty for Continue, and for a direction that
    is an order.

    Why: a reply that begins inside the input is about the input. On issue
    30's twelve tuning turns (SmolLM2-135M, three seeds each) the model's own
    words named what the input named in 15 of 33 replies begun so, against 7
    of 33 with the input only restated at the end of the prompt (the opening
    itself not counted)."""
    text = " ".join((line or "").split())
    if kind == "player":
        text = second_person(text.lstrip(">").strip())
    elif kind != "direction" or text.split(" ", 1)[0].lower().strip(",.!:;") in _ORDERS:
        return ""
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if _FINAL.search(text) else text + "."


# How the prompt's own sections begin (engine.context.builder writes them; a
# test holds these copies equal to it, so narrative never imports the builder).
# A sentence of a reply that begins so is the prompt said back, never story: a
# Continue reply of the 135M narrator opened "The story's premise: An old
# lighthouse…", another said "The story's premise has just changed forever".
PROMPT_LABELS = ("The story's premise", "Story summary:", "Memories from earlier in the story",
                 "Also from earlier in the story:", "Lines marked [inferred]", "The player's character is")
RULE_PROMPT_LABEL = "echoed_prompt_label"
_LABELS = "(?:" + "|".join(re.escape(label).replace("'", "['’]") for label in PROMPT_LABELS) + ")"
_LABEL_RE = re.compile(r"^[\s>*_#\"“]*" + _LABELS, re.IGNORECASE)
_LABEL_ANYWHERE = re.compile(_LABELS, re.IGNORECASE)


def echoed_prompt(text: str) -> tuple[str, list[str]]:
    """The reply without the sentences that begin with one of the prompt's
    section labels, and those sentences. A sentence that runs on past its
    line loses only its first line (the label's line). A reply that is
    nothing but such sentences is returned whole: an empty turn is worse, and
    the leak count still counts it."""
    if not _LABEL_ANYWHERE.search(text or ""):
        return text, []
    kept, removed = [], []
    for sentence in _sentences(text):
        if not _LABEL_RE.match(sentence):
            kept.append(sentence)
            continue
        body = sentence.lstrip()
        lead = sentence[: len(sentence) - len(body)]
        newline = body.find("\n")
        if newline != -1 and body[newline:].strip():
            removed.append(body[:newline].strip())
            kept.append(lead + body[newline:])
        else:
            removed.append(body.strip())
            kept.append(lead if "\n" in lead else "")
    cleaned = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()
    return (cleaned, removed) if cleaned and removed else (text, [])


# The player's marker at the very start of a reply: the 135M narrator
# imitating the prompt's "> You ..." lines (a reply of the narration evaluation: "> You're
# standing at the gate..."). Stored, it would read as the player's own line.
_PLAYER_MARKER = re.compile(r"\A\s*(?:>\s*)+")


def hold_rules(prose: str, earlier: str = "", repair_person: bool = True) -> tuple[str, dict]:
    """The reply as it is stored, and what was changed to hold the narration's
    rules: a leading player's marker ("> ") taken off, sentences `earlier`
    (the story the prompt showed) already holds dropped (`drop_copied`),
    first-person narration turned to "you" (speech, link text and code left
    as written; each change listed; `repair_person=False` leaves it), then the text cut
    back to its last complete sentence (the cut part is returned as `tail`,
    kept with the take's record so Continue goes on from a whole sentence and
    a reader can still see what was cut)."""
    marker = _PLAYER_MARKER.match(prose or "")
    unmarked = bool(marker and prose[marker.end():].strip())
    prose = prose[marker.end():] if unmarked else prose
    prose, echoes = echoed_prompt(prose)
    prose, copies = drop_copied(prose, earlier) if earlier else (prose, 0)
    repaired = repair_person and first_person(prose)
    person_changes: list[dict] = []
    if repaired:
        prose, person_changes = second_person_changes(prose)
    kept, tail = cut_to_sentence(prose)
    # Cutting can bring an echoed instruction from the middle to the new end,
    # where the clean-up removes it; when that instruction was all the complete
    # text (a 135M reply: "[Reminder: ...]\nShe could only see what"), the
    # story is what followed it, kept as trailing off.
    cleaned = split(kept).prose.strip()
    if cleaned:
        kept = cleaned
    elif tail.strip():
        kept, tail = split(tail).prose.strip() or tail.strip(), ""
    closed = not ends_at_sentence(kept)
    if closed:  # not one complete sentence to cut back to: marked as trailing off, and as cut
        kept = kept.rstrip(" ,;:—-") + "…"
    return kept, {"first_person_repaired": repaired, "tail": tail, "trailed_off": closed, "dropped_copies": copies,
                  "marker_dropped": unmarked, "prompt_echoes": echoes, "first_person_changes": person_changes,
                  "first_person_repair": repair_person}


# Words that name nothing: articles, pronouns, prepositions, conjunctions,
# numbers and the commonest verbs of a player's line.
_FUNCTION_WORDS = frozenset(
    "a an the this that these those my your his her its our their some any every each no one two three four "
    "five six seven eight nine ten times once twice i you he she it we they me him them us who whom whose what "
    "which where when why how is are was were be been am do does did have has had will would can could shall "
    "should may might must not and or but if then than so to of in on at by for with from into onto over under "
    "up down out off about after before through across near toward towards again there here last next "
    "begins begin starts start breaks comes arrives goes go get gets let lets make makes take takes steps "
    "anyone someone anything something nothing everyone everything".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_DETERMINERS = frozenset("a an the this that these those my your his her its our their some".split())


def _stem(word: str) -> str:
    """A plural's singular, near enough to match: wolves -> wolf, boxes -> box, trees -> tree."""
    word = word.lower().replace("’", "'").removesuffix("'s")
    if len(word) <= 3 or not word.endswith("s") or word.endswith("ss"):
        return word
    if word.endswith("ves"):
        return word[:-3] + "f"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1]


def _phrases(line: str) -> list[list[str]]:
    """The input's phrases, each its stemmed words in order: the words after
    a determiner up to the next function word ("the iron chest" -> [iron,
    chest]), or, when no phrase has one, each word that is not a function
    word alone ("Snow begins to fall" -> [snow], [fall]). The first word of
    an action is its verb, never a thing."""
    action = line.lstrip().startswith(">")
    words = _WORD.findall(line.lstrip("> "))
    if action and words and words[0].lower() in ("you", "i", "we"):
        words = words[2:]  # the actor and the verb ("You say", "I climb")
    # A direction's opening words are its subject ("Snow begins", "Fog rolls in").
    phrases, opened = [[]], not action
    for word in words:
        low = word.lower()
        if low in _DETERMINERS or low in _FUNCTION_WORDS:
            phrases.append([])
            opened = low in _DETERMINERS
        elif opened:
            phrases[-1].append(_stem(word))
    phrases = [p for p in phrases if p]
    return phrases or [[_stem(w)] for w in words if w.lower() not in _FUNCTION_WORDS and len(w) > 2]


def named_things(line: str) -> list[str]:
    """The things an input names, stemmed: every word of its phrases
    ("the iron chest" -> iron, chest)."""
    return list(dict.fromkeys(w for phrase in _phrases(line) for w in phrase))


def _new_things(wanted: list[str], known: str) -> list[str]:
    """The named things the `known` story does not name yet; all of them when it names every one."""
    if not known:
        return wanted
    seen = {_stem(w) for w in _WORD.findall(known)}
    return [w for w in wanted if w not in seen] or wanted


def takes_up(reply: str, line: str, known: str = "") -> bool | None:
    """Whether the reply names one of the things the input named (None when
    it named none): a reply that ignores every one is worth asking again.

    With `known` (the story the prompt showed), the things it already names
    are set aside while the input names anything new: "unfold the harbour
    master's letter" in a harbour town is about the letter, and a reply
    naming the harbour had passed (the narration evaluation's tuning turns: a judge without
    this let 2 of 3 starts through and gained no uptake)."""
    wanted = _new_things(named_things(line), known)
    if not wanted:
        return None
    said = {_stem(w) for w in _WORD.findall(reply or "")}
    return any(w in said for w in wanted)


def _verbs_of(direction: str) -> set[str]:
    """The stems of a direction's likely verbs: an -s word straight after
    another content word, not the line's last ("Fog rolls in", "A black cat
    follows you", "A cart rattles past"; "The guards draw swords" keeps its
    swords). Steered, "rolls" was written and "fog" never was."""
    words = _WORD.findall(direction)
    found = set()
    for before, word in zip(words, words[1:-1], strict=False):
        low = before.lower()
        if low not in _FUNCTION_WORDS and low not in _DETERMINERS and _stem(word) != word.lower():
            found.add(_stem(word))
    return found


def steer_words(kind: str | None, line: str, known: str = "") -> list[str]:
    """The words a reply to `line` is steered towards (engine.providers.worker
    biases their tokens until the reply names one): the thing each of the
    input's phrases names, its last word ("the harbour master's letter" ->
    letter, "the broken oar" -> oar: the steer stops at the first word
    written, and on the narration evaluation's tuning turns a written "harbour" or "broken"
    had stopped it short of the thing; of a direction, only its subject's:
    "sea" had stopped "Fog rolls in from the sea"), the story's `known` ones set aside,
    each as the input spelled it and as its singular. None for Continue."""
    if kind not in ("player", "direction"):
        return []
    phrases = _phrases(line)
    if kind == "direction":  # an event: what it is about is its subject ("Fog rolls in from the sea")
        verbs, subject = _verbs_of(line), phrases[0]
        phrases = [subject[:next((i for i, w in enumerate(subject) if w in verbs), len(subject))] or subject]
    wanted = _new_things(list(dict.fromkeys(p[-1] for p in phrases)), known)
    found = []
    for word in _WORD.findall(line.lstrip("> ")):
        stem = _stem(word)
        if stem in wanted:
            found += [word.lower().replace("’", "'").removesuffix("'s"), stem]
    return list(dict.fromkeys(found))


# A sentence is a copy when this share of its word 4-grams is already in the
# story; below 4 words a sentence is too short to call a copy.
COPY_SHARE = 0.8
COPY_MIN_WORDS = 4


def _sentences(text: str) -> list[str]:
    out, last = [], 0
    for m in _END.finditer(text or ""):
        out.append(text[last:m.end()])
        last = m.end()
    if text[last:].strip():
        out.append(text[last:])
    return out


# Words and numbers: "You have 3 coins." is not a copy of "You have 5 coins."
# (a number is a fact the story states; letters alone would call them one sentence).
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")


def _four_grams(text: str) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _TOKEN.findall(text)]
    return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}


def drop_copied(prose: str, earlier: str) -> tuple[str, int]:
    """The reply without the sentences the story already holds, and how many
    were dropped. A 135M narrator falls into copying its last reply (the narration
    evaluation: every reply from the fourteenth of twenty-four opened with the same
    sentence); a copy kept in the history is copied again. A reply that is
    nothing but copies is returned whole: an empty turn is worse."""
    seen = _four_grams(earlier)
    kept, dropped = [], 0
    for sentence in _sentences(prose):
        grams = _four_grams(sentence)
        if len(_TOKEN.findall(sentence)) >= COPY_MIN_WORDS and grams and len(grams & seen) / len(grams) >= COPY_SHARE:
            dropped += 1
        else:
            kept.append(sentence)
    text = "".join(kept).strip()
    return (text, dropped) if text else (prose, 0)
