"""Bounds on the text every prompt carries whole: one table, checked where the text enters.

The premise, the AI instructions, the author's note, the protagonist's name,
the campaign canon, the narrative state and the narrator instructions are
protected: the builder never drops them, so one that does not fit makes
every turn fail with ContextOverflow (an AI Dungeon scenario with a
300,000-character author's note imported, then could not play a turn). A
story card's text is priced under the knowledge share instead, but a card
longer than that share could never be shown whole. Each has a bound here, in
tokens, the builder's unit: characters vary fifteenfold in cost (0.25 tokens
each in English prose, 1.8 in CJK, 3.9 in rare scripts), so only a count in
tokens keeps the promise.

Where each is checked: imports (`engine.bundle`, and through it every other
tool's reader) cut a value past its bound and name the cut, with its size,
in the import report (a narrative state is shortened text by text, keeping
its keys: engine/bundle/statefit.py); `new_campaign`, `set_authors_note`,
the story-card calls and the settings refuse it in words, so the panels that
call them do too.

The bounds are sized so that a campaign with all of them full plays its first
turn at the default window. Measured on an empty campaign at 4,096 tokens
(the test narrator, a five-token input, builder v2): the reply 200, the safety
reserve 256, the narrator's rules 81, the state protocol's rule and reminder
561, the length hint 31, the input and its restatement 12, formatting 41:
1,182 tokens, leaving 2,914. The campaign's standing text (premise,
instructions, author's note, protagonist, canon and the narrative state)
takes at most 2,200 of them. With every field full of the costliest text
(rare CJK) and a story card (which adds the knowledge rule, 208 tokens) the
first prompt still leaves 489 tokens for the story, the memories and the
lore, and 270 with the narrator instructions at their own bound as well
(tests/story/test_bounds.py builds that prompt): tight, but a turn is built
and played, and a window of 8,192 or more has room to spare.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import tokens

__all__ = ["BOUNDS", "DEFAULT_WINDOW", "STANDING", "Bound", "check", "cut", "cut_rules", "excess", "measure"]

# Settings.n_ctx's default: the embedded narrator's window, which the story
# budget follows until someone sets it. The window a fresh setup plays at.
DEFAULT_WINDOW = 4096
# No prose spends more than this many characters a token (English averages
# 4.3 in cl100k, code about 3): a text longer than its bound times this is
# over without being counted, so a 100 MB premise is never tokenised whole.
CHARS_PER_TOKEN = 8


@dataclass(frozen=True)
class Bound:
    """One field's bound: `tokens` in the prompt, at most `chars` characters."""

    label: str
    tokens: int
    chars: int
    instead: str  # where longer text belongs, said in a refusal

    @property
    def words(self) -> str:
        return f"{self.tokens:,} tokens (about {min(self.tokens * 4, self.chars):,} characters of prose)"


BOUNDS: dict[str, Bound] = {
    # A character card's description and personality arrive here (as
    # character_as="premise"); SillyTavern's Seraphina is 700 tokens, and
    # arrives whole.
    "premise": Bound("The premise", 700, 700 * CHARS_PER_TOKEN,
                     "Longer background belongs in story cards or the knowledge library, which are priced per turn"),
    # Standing rules for the narrator: a paragraph or two.
    "ai_instructions": Bound("The AI instructions", 400, 400 * CHARS_PER_TOKEN,
                             "Longer lore belongs in story cards or the knowledge library"),
    # A sentence or two, placed near the end of the history where a small
    # model still heeds it; its limit was 1,000 characters before it had one
    # in tokens, and stays so (about 230 tokens of prose).
    "authors_note": Bound("The author's note", 250, 1000,
                          "Longer lore belongs in a story card"),
    # A name, or a name and a title; the column has always held 200 characters.
    "protagonist": Bound("The protagonist", 50, 200, "Describe the character in the premise or a story card"),
    # Rules the narrator may never contradict, each a line.
    "canon": Bound("The campaign canon", 200, 200 * CHARS_PER_TOKEN,
                   "Longer canon belongs in the knowledge library as a Canon source"),
    # The standing rules given first; the default is 81 tokens, so this is
    # room for nearly four times as many.
    "narrator_prompt": Bound("The narrator instructions", 300, 300 * CHARS_PER_TOKEN,
                             "Campaign-specific rules belong in the campaign's AI instructions"),
    # The narrative state as the prompt shows it (engine.narrative.render):
    # the renderer caps how many entities, facts and threads it lists, not
    # how long each text is, so an imported state is held to this whole.
    "state": Bound("The narrative state", 600, 600 * CHARS_PER_TOKEN,
                   "Longer descriptions belong in story cards"),
    # A character card's description and personality as the narrative state
    # shows its character on every turn (character_as="cast"), within the
    # state's own bound; the whole portrait stays in the cast card, which
    # enters when the character is named.
    "cast_description": Bound("A character's description in the narrative state", 400, 400 * CHARS_PER_TOKEN,
                              "The whole description belongs in the character's story card"),
    # Not protected but priced under the knowledge share, which on a fresh
    # campaign at the default window is 0.33 x 2,914 = 961 tokens: a longer
    # card could never be shown whole there.
    "card_entry": Bound("A story card's text", 960, 960 * CHARS_PER_TOKEN,
                        "Split it into several cards, or import it as knowledge"),
}
# The campaign's own protected fields: 2,200 tokens together at most (above).
STANDING = ("premise", "ai_instructions", "authors_note", "protagonist", "canon", "state")


def _count(text: str) -> int:
    """Tokens, without the shared cache: an over-long value is counted once
    and must not stay in memory as a cache key."""
    return len(tokens.encoding().encode(text, disallowed_special=()))


def measure(field: str, text: str) -> int | None:
    """The tokens `text` costs, or None when it is longer than the field's
    character bound (over the bound, and not worth counting)."""
    bound = BOUNDS[field]
    if len(text) > bound.chars:
        return None
    return tokens.count(text) if len(text) < 4096 else _count(text)


def excess(field: str, text: str) -> str | None:
    """A sentence saying how far `text` is past its bound, or None within it."""
    bound = BOUNDS[field]
    cost = measure(field, text)
    if cost is not None and cost <= bound.tokens:
        return None
    size = f"{len(text):,} characters" + (f" ({cost:,} tokens)" if cost is not None else "")
    return f"{bound.label}: {size}, past its bound of {bound.words}"


def check(field: str, text: Any, error: type[Exception], nothing: str = "Nothing was changed.") -> None:
    """Refuse `text` with `error` when it is past its bound, saying what to do."""
    if not isinstance(text, str):
        return  # the caller's own checks name a value that is not text
    found = excess(field, text.strip())
    if found:
        raise error(f"{found}. {BOUNDS[field].instead}. {nothing}")


def _first(text: str, n: int) -> str:
    """The opening of `text` within `n` tokens, ended at a word break when
    one is near (within the last fifth), never inside a character."""
    head = text[: n * CHARS_PER_TOKEN]
    ids = tokens.encoding().encode(head, disallowed_special=())
    while True:
        kept = tokens.encoding().decode(ids[:n]).rstrip("\ufffd")
        space = max(kept.rfind(" "), kept.rfind("\n"))
        if space > len(kept) * 0.8:
            kept = kept[:space]
        kept = kept.rstrip()
        over = _count(kept) - n
        if over <= 0:
            return kept
        n -= over  # decoding and encoding again may differ by a token or two


def cut(field: str, text: str, what: str | None = None) -> tuple[str, str | None]:
    """(`text` within its bound, a sentence naming the cut with its size or
    None). `what` names the value in that sentence (the field's label
    otherwise), e.g. "the story card “Harbour”'s text"."""
    bound = BOUNDS[field]
    if excess(field, text) is None:
        return text, None
    kept = _first(text[: bound.chars], bound.tokens)
    name = what or bound.label[0].lower() + bound.label[1:]
    return kept, (f"{name}: {len(text):,} characters, past its bound of {bound.words}; cut to its first "
                  f"{len(kept):,} characters, so that every turn can still be built at the default "
                  f"{DEFAULT_WINDOW:,}-token window")


def cut_rules(rules: list) -> tuple[list, str | None]:
    """Canon rules (a list; the builder shows the non-blank strings, a line
    each) within the canon's bound: whole rules in order while they fit, the
    first that does not fit cut if it is the first, the rest left out."""
    bound = BOUNDS["canon"]
    shown = [r for r in rules if isinstance(r, str) and r.strip()]
    joined = "\n".join(shown)
    if excess("canon", joined) is None:
        return rules, None
    kept, spent = [], 0
    for rule in shown:
        cost = measure("canon", rule)
        if cost is None or spent + cost + 1 > bound.tokens:
            if not kept:
                kept.append(_first(rule[: bound.chars], bound.tokens))
            break
        kept.append(rule)
        spent += cost + 1
    size = sum(len(r) for r in shown)
    shortened = " (cut short)" if kept and kept[0] != shown[0] else ""
    return kept, (f"the campaign canon: {len(shown):,} rules, {size:,} characters, past its bound of {bound.words}; "
                  f"the first {len(kept):,} kept{shortened}, so that every turn can still be built at the default "
                  f"{DEFAULT_WINDOW:,}-token window")
