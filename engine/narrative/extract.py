"""Separating the story from the state block the narrator appends to it.

Two failures matter, and they pull in opposite directions. Protocol left in
the prose is shown to the reader and, worse, replayed as history, so the next
prompt carries a second and older account of the state. Story taken out of
the prose is lost writing. Every rule below therefore anchors on text this
application owns (its fence label, its event names, its section headings, its
hint wording) and never on what prose merely looks like; each has a
look-alike test that must survive untouched.

The reference system measured why this matters: in a 104-turn run with a
small local narrator, the state section was pasted into the prose on 42 turns,
and 10 turns ended inside an unfinished object because the reply hit its
token limit.
"""
from __future__ import annotations

import ast
import bisect
import functools
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from . import render
from .events import SPECS, is_event_type, vocabulary_for_prompt

__all__ = [
    "CONTINUE_HINT_PHRASE",
    "EMIT_REMINDER",
    "EMIT_RULE",
    "EMIT_RULE_SHORT",
    "SHORT_RULE_WINDOW",
    "LENGTH_HINT_OPENING",
    "LENGTH_HINT_TAIL",
    "RESTATED_OPENING",
    "RULES",
    "RULE_DANGLING_JSON",
    "RULE_DANGLING_STATE",
    "RULE_EMPTY_FENCE",
    "RULE_EVENT_CALL",
    "RULE_INLINE_PROPOSAL",
    "RULE_INSTRUCTION_TAIL",
    "RULE_JSON_FENCE",
    "RULE_LENGTH_HINT",
    "RULE_PASTED_STATE",
    "RULE_LEADING_LABEL",
    "RULE_QUOTE_MARKER",
    "RULE_SCENE_LINE",
    "RULE_STATE_FENCE",
    "RULE_STATE_HEADING",
    "RULE_TRAILING_OBJECT",
    "RULE_TRUNCATED_OBJECT",
    "Extraction",
    "emit_rule",
    "split",
]

EMIT_RULE = (
    "When the story part is done, append one fenced ```state block holding a JSON object with "
    "an events list that records what this turn made true, and write nothing after it.\n"
    "\n"
    "Every value is ABSOLUTE: say how things stand now, never what changed or by how much. "
    "These are the only events, and each must be written in exactly this form:\n"
    f"{vocabulary_for_prompt()}\n"
    "\n"
    "Keys are short lower-case slugs and must be the keys the state you were shown already "
    "uses; the keys in the example only stand in for real ones. Bring a person, place or "
    "thing in with create_entity before any other event mentions it. When the turn "
    "established nothing, send an empty events list.\n"
    "Example:\n"
    "```state\n"
    '{"events": [{"type": "set_possession", "item": "item-1", "owner": "character-1"}, '
    '{"type": "set_current_location", "entity": "character-1", "location": "location-1"}]}\n'
    "```"
)
# The rule at small windows: the same fence, the same events in the same form,
# the objects alone (the parser needs nothing else). The full rule costs 529
# cl100k tokens, 13 % of the embedded 4,096-token window on every turn.
EMIT_RULE_SHORT = (
    "After the story, append one ```state block holding a JSON object whose events list records what "
    "this turn made true (empty if nothing did), and write nothing after it. Values say how things stand "
    "now. Each event is one of these objects; keys are short lower-case slugs, and create_entity comes "
    "before any other event names something new:\n"
    f"{vocabulary_for_prompt(compact=True)}"
)
# At or below this window the short rule is sent (the full one is 13 % of
# 4,096 tokens and 6 % of 8,192; 3 % of 16,384, where its summaries are kept).
SHORT_RULE_WINDOW = 8192


def emit_rule(window_tokens: int | None) -> str:
    """The protocol rule for a window: short where every token counts."""
    return EMIT_RULE_SHORT if window_tokens and window_tokens <= SHORT_RULE_WINDOW else EMIT_RULE


EMIT_REMINDER = (
    "[Reminder: once the story part is finished, append the ```state block; its events list "
    "holds what this turn established, and stays empty if nothing changed.]"
)

# The length hint's own words. engine/context/length.py builds the hint; these
# copies are what an echo of it is recognised by, and a test holds the two
# equal so they cannot drift apart without a failure.
LENGTH_HINT_OPENING = "[Hard limit:"
LENGTH_HINT_TAIL = "Bring the passage to a close well inside that limit."
# The sentence of providers.base.CONTINUE_HINT a narrator parrots back; a copy,
# not an import, so narrative never depends on providers (a test pins it).
CONTINUE_HINT_PHRASE = "Write only the next passage of story text"
# How the builder says the turn's input again, last (engine.context.builder.restated);
# a copy for the same reason, held equal by a test.
RESTATED_OPENING = "[Now:"

# Rule ids, one per kind of removal, so an audit or a replay can say what came
# out of a reply and why.
RULE_STATE_FENCE = "state_fence"
RULE_JSON_FENCE = "json_fence"
RULE_TRAILING_OBJECT = "trailing_object"
RULE_INLINE_PROPOSAL = "inline_proposal"
RULE_EVENT_CALL = "event_call_line"
RULE_PASTED_STATE = "pasted_state_section"
RULE_LENGTH_HINT = "echoed_length_hint"
RULE_INSTRUCTION_TAIL = "echoed_instruction_tail"
RULE_DANGLING_STATE = "dangling_state_fence"
RULE_DANGLING_JSON = "dangling_json_fence"
RULE_TRUNCATED_OBJECT = "truncated_object"
RULE_STATE_HEADING = "trailing_state_heading"
RULE_QUOTE_MARKER = "bare_quote_marker"
RULE_EMPTY_FENCE = "empty_dangling_fence"
RULE_SCENE_LINE = "rendered_scene_line"
RULE_LEADING_LABEL = "leading_label"
RULES = (
    RULE_STATE_FENCE, RULE_JSON_FENCE, RULE_TRAILING_OBJECT, RULE_INLINE_PROPOSAL,
    RULE_EVENT_CALL, RULE_PASTED_STATE, RULE_LENGTH_HINT, RULE_INSTRUCTION_TAIL,
    RULE_DANGLING_STATE, RULE_DANGLING_JSON, RULE_TRUNCATED_OBJECT, RULE_STATE_HEADING,
    RULE_QUOTE_MARKER, RULE_EMPTY_FENCE, RULE_SCENE_LINE, RULE_LEADING_LABEL,
)


@dataclass(frozen=True)
class Extraction:
    """`events` is None when no readable proposal was found, which is not the
    same as [] (the narrator said nothing changed); `raw_block` keeps what was
    found either way, so an unreadable proposal stays visible to the audit."""

    prose: str
    events: list | None
    raw_block: str
    removals: list[tuple[str, str]] = field(default_factory=list)


_NAMES = "|".join(re.escape(name) for name in SPECS)
# The label must end its line or run straight into the payload: "a ```state
# block" inside a parroted reminder once read as a fence and cut the middle
# out of a reply.
_STATE_FENCE_RE = re.compile(r"```state[^\S\n]*(?:\n|(?=[\[{]))(.*?)```", re.DOTALL | re.IGNORECASE)
_FENCE_TOKEN_RE = re.compile(r"```([A-Za-z]*)")
_PROTOCOL_RE = re.compile(rf"""["']events["']\s*:|["']type["']\s*:\s*["'](?:{_NAMES})["']""", re.IGNORECASE)
_KEYWORD_RE = re.compile("events|type", re.IGNORECASE)  # a word every protocol marker holds
_EVENT_CALL_RE = re.compile(rf"^[ \t]*(?:>[ \t]*)?(?:{_NAMES})[ \t]*\(", re.IGNORECASE | re.MULTILINE)
# A line opening an object, quoted or not, that could be a proposal. A line
# whose object closes on it with no quote or colon inside, as `> {}` or
# `{ x }`, is passed over: it holds no key, so it is no proposal and ends
# nothing, and 100 KB of `> {}` lines took 0.13 s read one by one.
_OBJECT_LINE_RE = re.compile(r'^[ \t]*(?:>[ \t]*)?\{(?![^\n{}"\\:]*\})', re.MULTILINE)
# A line opening an object once the quote markers are off.
_BARE_OBJECT_RE = re.compile(r"^[ \t]*\{", re.MULTILINE)
_QUOTE_RE = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
_STATE_HEADING_RE = re.compile(r"^[ \t>*#_]*state[ \t*_:]*$", re.IGNORECASE)
_DECORATION_RE = re.compile(r"^[\s#>*_]+|[\s*_]+$")
# A whole line that _section_heading takes for one of ours, to find in one search.
_SECTION_LINE_RE = re.compile(
    rf"^(?:[^\S\n]|[#>*_])*(?:{'|'.join(map(re.escape, render.SECTION_HEADINGS))})(?:[^\S\n]|[*_])*$", re.MULTILINE
)
# The hint's wording, in the project's form and the reference's; a narrator
# rewords the front and keeps one of these. "[Hard limit: forty days]" has none.
_HINT_WORDS_RE = re.compile(
    r"must not (?:exceed|run past) \d+ words|stop short of about \d+|state block|well inside (?:that|the) limit",
    re.IGNORECASE,
)
# A bracket closing the reply, or one the output limit cut off before it closed.
_CLOSED_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]\s*\Z")
_OPEN_BRACKET_RE = re.compile(r"\[([^\[\]\n]*)\Z")
_DANGLING_STATE_RE = re.compile(r"```state[^\S\n]*(?:\n|(?=[\[{])|\Z)", re.IGNORECASE)
_DANGLING_JSON_RE = re.compile(r"```json\b((?:(?!```).)*)\Z", re.DOTALL | re.IGNORECASE)
_EMPTY_OPENER_RE = re.compile(r"```(?:json)?[ \t]*", re.IGNORECASE)
_SCENE_AT_RE = re.compile(r"\(at [^()\n]+\)\s*$")
# What a tail rule other than the dangling ```json keys on in the last line.
_STIRRING_RE = re.compile(r"[\[\]`>]|state|scene", re.IGNORECASE)
_UNLIKE_AN_OPENING_RE = re.compile(r'[^\s{"evnts]')  # not in an opening `{"events` cut short
_BLANK_RUN_RE = re.compile(r"\n{3,}")
_FENCE_LINE_RE = re.compile(r"^[^\S\n]*```", re.MULTILINE)
_SPECIAL_RE = re.compile(r'[{}"\\]')
# Everything up to the next brace outside a string, then that brace: a string
# is passed over whole, so a scan takes a step per brace, not per character.
# Possessive, so a string never closed ends the scan instead of being re-read.
_NEXT_BRACE_RE = re.compile(r'(?:[^{}"]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+([{}])', re.DOTALL)
_DECODER = json.JSONDecoder()
# A state block is a few hundred characters; Python's literal parser is only
# tried below this size, so a pathological reply cannot make it crawl.
MAX_LITERAL_CHARS = 20_000


# ------------------------------------------------------------ reading a block

def _tolerant_load(raw: str) -> Any:
    """Parses what a small model wrote, forgiving the slips small models make.

    Trailing commas, typographic quotes, a note after the object and Python's
    single quotes are each cheap to forgive, and a proposal lost to one of them
    is a turn's state lost; anything worse is None, and the raw text is kept.
    """
    text = raw.strip()
    if not text:
        return None
    for candidate in _forgiven(text):
        try:
            return _DECODER.raw_decode(candidate)[0]
        except ValueError:
            pass
    try:
        return ast.literal_eval(text) if len(text) < MAX_LITERAL_CHARS else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _forgiven(text: str):
    """The text, then with typographic quotes straightened, then also without trailing
    commas: each made only if the one before failed to parse."""
    yield text
    straight = text.replace("“", '"').replace("”", '"')
    yield straight
    yield re.sub(r",\s*([}\]])", r"\1", straight)


def _is_event(item: Any) -> bool:
    return isinstance(item, dict) and is_event_type(item.get("type"))


def _looks_like_proposal(parsed: Any) -> bool:
    if isinstance(parsed, dict):
        return isinstance(parsed.get("events"), list) or _is_event(parsed)
    return isinstance(parsed, list) and bool(parsed) and all(map(_is_event, parsed))


def _may_be_proposal(raw: str) -> bool:
    """Whether parsing `raw` could find a proposal: every one holds a key and a closing brace."""
    return ":" in raw and "}" in raw


def _events_of(parsed: Any) -> list | None:
    if isinstance(parsed, dict) and isinstance(parsed.get("events"), list):
        return list(parsed["events"])
    if _is_event(parsed):
        return [parsed]
    if isinstance(parsed, list) and all(isinstance(item, dict) for item in parsed):
        return list(parsed)
    return None


def _reads_as_protocol(text: str) -> bool:
    return bool(_PROTOCOL_RE.search(text))


def _last_protocol(text: str) -> int:
    """Where the last protocol marker starts, so "does protocol follow?" costs nothing."""
    return max((m.start() for m in _PROTOCOL_RE.finditer(text)), default=-1)


class _Braces:
    """Where each object in a text closes, found in as few passes as possible.

    A scan that meets a `{` outside any string is, from there on, in exactly
    the state a fresh scan from that brace would be in, so one pass answers
    for every brace it meets outside strings; only a brace it saw inside a
    string needs a pass of its own. Scanning afresh from every candidate was
    quadratic: 3 s for a 16 KB reply of brace lines.
    """

    def __init__(self, text: str):
        self.text = text
        self.known: dict[int, int | None] = {}

    def end(self, start: int) -> int | None:
        """Just past the brace closing the object opened at `start`, or None."""
        if start not in self.known:
            self._scan(start)
        return self.known[start]

    def _scan(self, start: int) -> None:
        stack: list[int] = []
        position = start
        while match := _NEXT_BRACE_RE.match(self.text, position):
            position = match.end()
            if match.group(1) == "{":
                stack.append(position - 1)
            elif stack:
                self.known[stack.pop()] = position
        self.known.update(dict.fromkeys(stack))
        self.known.setdefault(start, None)


# ------------------------------------------------------------ the blocks

_UNREAD = object()


@dataclass
class _Block:
    """One proposal found in the text: where it sat, what it said, what came out."""

    rule: str
    start: int
    end: int
    raw: str
    cut: str
    _parsed: Any = field(default=_UNREAD, repr=False)

    @property
    def parsed(self) -> Any:
        """Parsed when first asked: of 100 KB of stacked fences only the chosen one ever is."""
        if self._parsed is _UNREAD:
            self._parsed = _tolerant_load(self.raw)
        return self._parsed


def _block(rule: str, text: str, start: int, end: int, raw: str) -> _Block:
    return _Block(rule, start, end, raw.strip(), text[start:end])


def _state_fences(text: str) -> list[_Block]:
    return [_block(RULE_STATE_FENCE, text, m.start(), m.end(), m.group(1)) for m in _STATE_FENCE_RE.finditer(text)]


def _json_fences(text: str) -> list[_Block]:
    """Paired ```json or bare fences that hold a proposal; a story's own code stays.

    A body is parsed only if it could hold a proposal, and with no closing
    brace or protocol marker anywhere none can: pairing and parsing 100 KB
    of stacked fences took about 65 ms.
    """
    if "}" not in text and not _reads_as_protocol(text):
        return []
    tokens = [t for t in _FENCE_TOKEN_RE.finditer(text) if t.group(1).lower() != "state"]
    found = []
    for opener, closer in zip(tokens[::2], tokens[1::2], strict=False):
        if opener.group(1).lower() not in ("", "json"):
            continue
        block = _block(RULE_JSON_FENCE, text, opener.start(), closer.end(), text[opener.end():closer.start()])
        if _reads_as_protocol(block.raw) or (_may_be_proposal(block.raw) and _looks_like_proposal(block.parsed)):
            found.append(block)
    return found


def _trailing_object(text: str) -> list[_Block]:
    """The outermost object that closes exactly at the end of the reply, if a proposal."""
    end, braces = len(text.rstrip()), _Braces(text)
    if not text.endswith("}", 0, end) or ":" not in text:
        return []  # no object closes there, or none is a proposal: no need to scan every brace
    for match in re.finditer(r"\{", text):
        if braces.end(match.start()) == end:
            start = _line_start_if_bare(text, match.start())
            block = _block(RULE_TRAILING_OBJECT, text, start, end, text[match.start():end])
            return [block] if _looks_like_proposal(block.parsed) else []
    return []


def _line_start_if_bare(text: str, position: int) -> int:
    """Widens a cut to its line's start when only indentation or a `>` precede it."""
    start = text.rfind("\n", 0, position) + 1
    return start if not text[start:position].strip(" \t>") else position


def _take_blocks(text: str) -> tuple[str, list[_Block]]:
    """Every fenced or trailing proposal leaves the text, kinds in order of priority.

    A ```state fence is the label we asked for, so it outranks a ```json or
    bare fence, which outranks a bare object closing the reply. Each finder
    reads the text the earlier ones left, so one block is never found twice.
    """
    blocks: list[_Block] = []
    for finder in (_state_fences, _json_fences, _trailing_object):
        found = finder(text)
        if found:
            blocks.extend(found)
            text = _remove_spans(text, [(b.start, b.end) for b in found])
    return text, blocks


def _remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, cursor = [], 0
    for start, end in sorted(spans):
        pieces.append(text[cursor:start])
        cursor = max(cursor, end)
    pieces.append(text[cursor:])
    return _BLANK_RUN_RE.sub("\n\n", "".join(pieces))


# ------------------------------------------------------------ cleanup, one pass

def _event_call_lines(text: str) -> tuple[str, list[str]]:
    """R1: whole lines opening with a call to one of our events, outside code fences.

    The names come from SPECS, so a story's own `open_door(north)` is no match.
    One search settles the usual reply, which has none.
    """
    if "(" not in text or not _EVENT_CALL_RE.search(text):
        return text, []
    kept, removed, in_fence = [], [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and _EVENT_CALL_RE.match(line):
            removed.append(line)
            continue
        kept.append(line)
    return "\n".join(kept), removed


def _is_state_heading(line: str) -> bool:
    return bool(_STATE_HEADING_RE.match(line))


def _heading_above(text: str, line_start: int) -> int:
    """Widens a cut upwards over a bare `State` heading written just above it."""
    end = line_start  # as text[:line_start].rstrip(), without copying the text before every block
    while end > 0 and text[end - 1].isspace():
        end -= 1
    start = text.rfind("\n", 0, end) + 1
    return start if end and _is_state_heading(text[start:end]) else line_start


def _line_end(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end == -1 else end


def _quoted_run(text: str, start: int) -> list[tuple[int, int]]:
    """The spans of the consecutive `>`-quoted lines from `start`."""
    spans = []
    while start < len(text):
        end = _line_end(text, start)
        if not _QUOTE_RE.match(text[start:end]):
            break
        spans.append((start, end))
        start = end + 1
    return spans


def _quoted_object(text: str, start: int) -> tuple[list[tuple[int, int]], str, int | None]:
    """(the quoted lines read, their text with the markers off, just past the
    closing brace in it or None) for an object opening a `>`-quoted line.

    Lines are read only until the object closes: reading the whole quoted run
    for every object in it was quadratic (100 KB of `> {}` lines never ended).
    """
    spans, lines, scan = [], [], _CloseScan()
    closing, offset = None, 0
    while start < len(text) and closing is None:
        end = _line_end(text, start)
        if not _QUOTE_RE.match(text[start:end]):
            break
        line = _QUOTE_RE.sub("", text[start:end], count=1)
        spans.append((start, end))
        lines.append(line)
        found = scan.feed(line, line.find("{") if len(lines) == 1 else 0)
        closing = None if found is None else offset + found
        offset += len(line) + 1
        start = end + 1
    if closing is None:
        spans += _quoted_run(text, start)  # unclosed: the rest of the run goes with it
        lines += [_QUOTE_RE.sub("", text[a:b], count=1) for a, b in spans[len(lines):]]
    return spans, "\n".join(lines), closing


class _CloseScan:
    """Where an object closes, read a line at a time by exactly the rules of `_Braces`."""

    def __init__(self) -> None:
        self.depth, self.in_string = 0, False

    def feed(self, line: str, start: int) -> int | None:
        """Just past the closing brace within `line`, or None when still open.
        (A backslash ending a line escapes the newline, which is no special character.)"""
        skip = -1
        for match in _SPECIAL_RE.finditer(line, max(start, 0)):
            char, position = match.group(), match.start()
            if position == skip:
                continue  # the character after a backslash
            if self.in_string:
                skip = position + 1 if char == "\\" else skip
                self.in_string = char != '"'
            elif char == '"':
                self.in_string = True
            elif char == "{":
                self.depth += 1
            elif char == "}" and self.depth:
                self.depth -= 1
                if not self.depth:
                    return match.end()
        return None


def _unquoted(text: str, spans: list[tuple[int, int]]) -> str:
    return "\n".join(_QUOTE_RE.sub("", text[a:b], count=1) for a, b in spans)


def _looks_json_ish(rest_of_line: str) -> bool:
    """Whether an unclosed `{` line opens JSON rather than a story's stray brace."""
    rest = rest_of_line.strip()
    return not rest or rest[0] in "\"'{[" or _reads_as_protocol(rest)


def _line_object(text: str, line_start: int, braces: _Braces) -> tuple[bool, _Block | None, int]:
    """(closed, the block if it is a proposal on lines of its own, where the examined region ends).

    A quoted object is read with its `>` markers off, across its run of quoted
    lines; an unclosed quoted object takes its whole run with it.
    """
    quoted = _QUOTE_RE.match(text, line_start) is not None
    spans, body, closing = _quoted_object(text, line_start) if quoted else ([], "", None)
    if spans:
        opening = body.find("{")
        if closing is None:
            return False, None, spans[-1][1]
        end = spans[-1][1]
    else:
        body, opening = text, text.find("{", line_start)
        closing = braces.end(opening)
        if closing is None:
            return False, None, _line_end(text, line_start)
        end = _line_end(text, closing)
    raw = body[opening:closing].strip()
    if body[closing:_line_end(body, closing)].strip() or not _may_be_proposal(raw):
        return True, None, end  # prose after the brace (a story's own braces), or no key at all
    parsed = _tolerant_load(raw)
    if not _looks_like_proposal(parsed):
        return True, None, end
    start = _heading_above(text, line_start)
    return True, _Block(RULE_INLINE_PROPOSAL, start, end, raw, text[start:end], parsed), end


def _inline_proposals(text: str) -> tuple[str, list[_Block]]:
    """Unfenced proposals on their own lines, quoted or not, anywhere in the reply.

    Outermost first: a proposal's own event objects open lines too, and one of
    them must never pass for the whole proposal. An unclosed object with
    protocol after it ends the search, since everything after it lies inside it.
    Past both the last closing brace and the last marker no object can close
    or end the search, so the lines there are not read at all.
    """
    braces, last_marker = _Braces(text), _last_protocol(text)
    horizon = max(last_marker, text.rfind("}"))
    found, skip_until = [], 0
    for match in _OBJECT_LINE_RE.finditer(text) if horizon >= 0 else ():
        if match.start() > horizon:
            break
        if match.start() < skip_until:
            continue
        closed, block, skip_until = _line_object(text, match.start(), braces)
        if not closed and match.start() <= last_marker:
            break
        if block is not None:
            found.append(block)
    if not found:
        return text, []
    whole_lines = [(b.start, b.end + text.startswith("\n", b.end)) for b in found]
    return _remove_spans(text, whole_lines), found


def _section_heading(line: str) -> str | None:
    bare = _DECORATION_RE.sub("", line)
    return bare if bare in render.SECTION_HEADINGS else None


def _is_scene_line(line: str) -> bool:
    bare = _DECORATION_RE.sub("", line)
    return bare == render.HEADING_SCENE or bare.startswith(render.HEADING_SCENE + " ")


def _scene_above(lines: list[str], index: int) -> int | None:
    above = index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    return above if above >= 0 and _is_scene_line(lines[above]) else None


def _is_entry(line: str) -> bool:
    """An indented line under a heading, also when the whole paste was `>`-quoted."""
    bare = _QUOTE_RE.sub("", line, count=1)
    return bool(bare.strip()) and bare[:1] in (" ", "\t")


def _pasted_block(lines: list[str], first: int) -> tuple[int, int, bool]:
    """(start, last line, whether it qualifies) for a run opening with a heading.

    It qualifies with two headings, a heading under a scene line, or a heading
    with an indented entry; a lone "Held:" followed by prose is story.
    """
    scene = _scene_above(lines, first)
    headings, entries, last = set(), 0, first
    for index in range(first, len(lines)):
        heading = _section_heading(lines[index])
        if heading or _is_entry(lines[index]):
            headings.update([heading] if heading else [])
            entries += 0 if heading else 1
            last = index
        elif lines[index].strip():
            break
    qualifies = len(headings) >= 2 or scene is not None or entries > 0
    return (first if scene is None else scene), last, qualifies


def _pasted_sections(text: str) -> tuple[str, list[str]]:
    """A copy of the rendered state section, pasted or imitated, keyed on our headings.

    A reply holding none of our headings anywhere is settled without reading a line.
    """
    if not any(heading in text for heading in render.SECTION_HEADINGS) or not _SECTION_LINE_RE.search(text):
        return text, []
    lines = text.split("\n")
    drop, removed, index = set(), [], 0
    while index < len(lines):
        if _section_heading(lines[index]) is None:
            index += 1
            continue
        start, last, qualifies = _pasted_block(lines, index)
        if qualifies:
            drop.update(range(start, last + 1))
            removed.append("\n".join(lines[start:last + 1]))
        index = last + 1
    if not removed:
        return text, []
    return _BLANK_RUN_RE.sub("\n\n", "\n".join(x for i, x in enumerate(lines) if i not in drop)), removed


# ------------------------------------------------------------ cleanup, the tail

def _is_length_hint(inner: str) -> bool:
    return _opens_like_hint(inner) and bool(_HINT_WORDS_RE.search(inner))


def _opens_like_hint(inner: str) -> bool:
    return inner.lstrip().lower().startswith(LENGTH_HINT_OPENING[1:].lower())


def _is_echoed_instruction(inner: str) -> bool:
    low = inner.lower().strip()
    return (
        "```" in low
        or low.startswith(("reminder:", "continue the story", RESTATED_OPENING[1:].lower()))
        or CONTINUE_HINT_PHRASE.lower() in low
        or _is_length_hint(inner)
        or ("state block" in low and "events list" in low)
    )


def _echoed_bracket(tail: _Tail, instruction_cut: bool) -> tuple[int, str] | None:
    """R2/R5: a final bracket that is one of our instructions, closed or cut off.

    Once one instruction came off, a bracket merely opening like the length
    hint is taken too: a narrator rewords the rest. On its own, an in-world
    "[Hard limit: forty days]" stays.
    """
    text, end, last = tail.text, tail.end, tail.last_bracket()
    # Neither pattern lets a bracket follow its own, so a match starts at the
    # final "[": a closed one only when the reply ends in "]", an open one
    # only when that "[" is on the last line. Trying both from a "[" far back
    # read the whole text again on every pass.
    if last < 0:
        return None
    if text.endswith("]", 0, end):
        pattern = _CLOSED_BRACKET_RE
    elif last > text.rfind("\n", 0, end):
        pattern = _OPEN_BRACKET_RE
    else:
        return None
    match = pattern.match(text, last, end)
    if match is None:
        return None
    inner = match.group(1)
    if _is_length_hint(inner):
        return match.start(), RULE_LENGTH_HINT
    if _is_echoed_instruction(inner) or (instruction_cut and _opens_like_hint(inner)):
        return match.start(), RULE_INSTRUCTION_TAIL
    return None


def _dangling_state_fence(tail: _Tail) -> int | None:
    """Our own label opens nothing but protocol, so an unclosed one ends the story."""
    return tail.first_state_opener()


def _dangling_json_fence(tail: _Tail) -> int | None:
    """An unclosed ```json goes only when what follows is ours: a story may leave code open."""
    # The body holds no fence, so an unclosed opener is the last ``` there is.
    last = tail.last_fence()
    match = _DANGLING_JSON_RE.match(tail.text, last, tail.end) if last >= 0 else None
    if match is None:
        return None
    body = match.group(1).strip()
    cut_at_start = body.startswith("{") and '"events"'.startswith(body[1:].strip())
    return match.start() if cut_at_start or _reads_as_protocol(body) else None


def _trailing_state_heading(tail: _Tail) -> int | None:
    start, line = tail.last_line()
    return start if start is not None and _is_state_heading(line) else None


def _bare_quote_marker(tail: _Tail) -> int | None:
    start, line = tail.last_line()
    return start if start is not None and line.strip() == ">" else None


def _empty_fence_opener(tail: _Tail) -> int | None:
    """R4: an empty ``` or ```json last line, only when it opens (odd fence count)."""
    start, line = tail.last_line()
    if start is None or not _EMPTY_OPENER_RE.fullmatch(line.strip()):
        return None
    return start if tail.fence_lines() % 2 else None


def _trailing_scene_line(tail: _Tail, protocol_cut: bool) -> int | None:
    """R3: the renderer's scene line left last, known by its `(at …)` or by company.

    A screenplay's closing "Scene: Night." in a reply with no protocol stays.
    """
    start, line = tail.last_line()
    if start is None or not line.strip().startswith(render.HEADING_SCENE + " "):
        return None
    return start if protocol_cut or _SCENE_AT_RE.search(line) else None


def _truncated_object(text: str) -> int | None:
    """The outermost line-start object that never closes and reads as protocol.

    A reply that hits its token limit ends inside its block. Cutting at the
    outer brace matters: the finished event objects inside it close, and a cut
    at the last of them left the list above it in the story. Quote markers
    come off every line first, as a quoted block was truncated too. Only an
    object opening before the last marker can be cut, so without one nothing
    is walked.
    """
    if "{" not in text or not _KEYWORD_RE.search(text):
        return None  # no object, or no marker (taking quote markers off makes no word): nothing to cut
    body = _QUOTE_RE.sub("", text)
    braces, last_marker, resume = _Braces(body), _last_protocol(body), 0
    for match in _BARE_OBJECT_RE.finditer(body):
        brace = match.end() - 1
        if brace > last_marker:
            return None
        if brace < resume:
            continue  # inside an object that closed: one of its own events
        closing = braces.end(brace)
        if closing is not None:
            resume = closing
        elif _looks_json_ish(body[brace + 1:_line_end(body, brace)]):
            return _line_start(text, body.count("\n", 0, brace))
    return None


def _line_start(text: str, index: int) -> int:
    """Where line `index` (from 0) of the text begins."""
    return len(text) - len(text.split("\n", index)[-1])


def _rstripped_end(text: str, end: int) -> int:
    """len(text[:end].rstrip()), read back from `end` instead of copying the text."""
    if end and not text[end - 1].isspace():
        return end
    size = 16
    while end > 0:
        chunk = text[max(end - size, 0):end]
        kept = len(chunk.rstrip())
        if kept:
            return end - len(chunk) + kept
        end, size = end - len(chunk), size * 4
    return 0


class _Tail:
    """The reply as the tail rules leave it: one text, where it now ends, and the cuts.

    The tail rules only ever cut the reply back to a prefix of itself, so the
    tail keeps where it ends instead of copying the text at every cut, and
    what a rule asks of the whole text (where fences, brackets and the first
    state opener sit) is read once, off the text it began as. Searching afresh
    on each pass made a reply of stacked leftovers quadratic: 16 s for 100 KB
    of repeated state fences, 14 s for 45 KB of repeated json fences.
    """

    def __init__(self, text: str, removals: list[tuple[str, str]]):
        self.text, self.end, self.removals = text, len(text), removals
        self.state = _DANGLING_STATE_RE.search(text)
        self._found: dict[str, int] = {}
        self._last_line: tuple[int, int | None, str] = (-1, None, "")  # (end, start, line)

    @functools.cached_property
    def fence_ends(self) -> list[int]:
        """Just past the ``` of each line that opens with one, in order."""
        return [m.end() for m in _FENCE_LINE_RE.finditer(self.text)]

    @property
    def prefix(self) -> str:
        return self.text[:self.end]

    def last_line(self) -> tuple[int | None, str]:
        """(where the last line starts, the line); None for a one-line text, which is never cut away."""
        if self._last_line[0] != self.end:
            start = self.text.rfind("\n", 0, self.end) + 1
            self._last_line = (self.end, start if start else None, self.text[start:self.end])
        return self._last_line[1:]

    def _last(self, needle: str) -> int:
        """text.rfind(needle), searching back only from where it was last found.

        The end only moves back, so a needle found before the end still is
        the last one; each stretch of text is searched at most once.
        """
        found = self._found.get(needle)
        if found is None or found + len(needle) > self.end:
            found = self._found[needle] = self.text.rfind(needle, 0, self.end)
        return found

    def last_bracket(self) -> int:
        return self._last("[")

    def last_fence(self) -> int:
        return self._last("```")

    def first_state_opener(self) -> int | None:
        if self.state is not None and self.state.end() <= self.end:
            return self.state.start()
        # Cut inside or before it: only an opener ending the text can match now.
        last = self.last_fence()
        found = _DANGLING_STATE_RE.match(self.text, last, self.end) if last >= 0 else None
        return None if found is None else found.start()

    def fence_lines(self) -> int:
        return bisect.bisect_right(self.fence_ends, self.end)

    def cut(self, start: int, rule: str) -> None:
        """Cuts from `start` on, leaving what text[:start].rstrip() would."""
        self.removals.append((rule, self.text[start:self.end].strip()))
        self.end = _rstripped_end(self.text, start)

    def cut_lines(self, start: int, rule: str, run: _LineRun | None) -> None:
        """Cuts the last line from `start`, and with it the run of its kind it ends, if any."""
        first = run.start(self.text, self.end) if run is not None else None
        if first is None or first == start:
            self.cut(start, rule)
            return
        lines = filter(None, map(str.strip, reversed(self.text[first:self.end].split("\n"))))
        for line, same in itertools.groupby(lines):  # a removal a line, one tuple for equal ones
            self.removals += [(rule, line)] * len(list(same))
        self.end = _rstripped_end(self.text, first)


# ------------------------------------------------------------ the tail, stacked
# A pass of the tail loop cuts a leftover or two, and 100 KB of one leftover
# stacked over and over is up to 50,000 passes. What follows makes many of
# those passes at once, each only where it can tell they would cut just that:
# a run of lines of one kind, a run of dangling ```json fences, and copies,
# above it, of the block a pass cut. Every cut is still a removal of its own.

class _LineRun:
    """The run of lines of one kind that a tail rule would cut one pass at a time.

    When such a rule makes the first cut of a pass and the line above is of
    its kind too, the next pass cuts that line and nothing else. The rules
    before it saw the text and cut nothing, and taking a line of these kinds
    off changes nothing they key on: the kinds exclude one another, none
    holds a bracket or a backtick, so no fence or bracket comes to the end,
    and the ```json body above only gets shorter, ending in a line no opening
    `{"events` ends in. So the run goes at once: a pass a line took 0.17 s for
    100 KB of `>` lines.
    """

    def __init__(self, line: str):
        self.line = re.compile(rf"^(?:{line})[^\S\n]*$", re.MULTILINE)
        self.other = re.compile(rf"^(?![^\S\n]*$|(?:{line})[^\S\n]*$).+", re.MULTILINE)

    def start(self, text: str, end: int) -> int | None:
        """Where the run ending text[:end] begins, or None when its last line is not of the kind.

        The first line of the text never belongs, as a one-line reply is never
        cut away. The lines above are read back in stretches as long as the run
        found so far, so finding a run costs about its own length, however
        long the text above it.
        """
        last = text.rfind("\n", 0, end) + 1
        if not last or not self.line.match(text, last, end):
            return None
        read = last  # text[read:end] holds lines of the kind and blank ones only
        while read:
            low = text.rfind("\n", 0, max(2 * read - end, 0)) + 1  # a line start
            other = None
            for match in self.other.finditer(text, low, read):
                other = match  # the last line not of the kind
            if other is not None:
                return self.line.search(text, other.end(), end).start()
            read = low
        return self.line.search(text, text.find("\n", 0, end), end).start()  # below the first line


_HEADING_RUN = _LineRun(r"[ \t>*#_]*(?i:state)[ \t*_:]*")
_QUOTE_RUN = _LineRun(r"[^\S\n]*>")
# Scene lines with no bracket or backtick, with and without protocol cut before them.
_SCENE_RUNS = {
    True: _LineRun(r"[^\S\n]*Scene: [^\[\]`\n]*[^\s\[\]`]"),
    False: _LineRun(r"[^\S\n]*Scene: [^\[\]`\n]*\(at [^()\[\]`\n]+\)"),
}


def _cut_json_fences(tail: _Tail, start: int) -> None:
    """Cuts the dangling ```json at `start`, then each one the passes after would cut.

    A pass that cuts a dangling ```json goes on to cut a `State` heading it
    leaves last. While the line left last then holds nothing another rule
    keys on (a bracket, a backtick, a `>`, "state" or "scene"), the next pass
    can only cut the next dangling ```json, so those passes run here without
    asking the other rules, and copies of a block cut so go at once: 100 KB
    of stacked fences is 11,111 passes.
    """
    text = tail.text
    while start is not None:
        end, cuts = tail.end, len(tail.removals)
        tail.cut(start, RULE_DANGLING_JSON)
        line = text.rfind("\n", 0, tail.end) + 1
        if _STIRRING_RE.search(text, line, tail.end):
            if not (line and _HEADING_RUN.line.match(text, line, tail.end) and _is_still(text, line)):
                return  # another rule may fire: back to the pass, whose own rules take it
            tail.cut(line, RULE_STATE_HEADING)
        _cut_copies(tail, end, cuts)
        start = _dangling_json_fence(tail)


def _is_still(text: str, line_start: int) -> bool:
    """Whether the line a cut from `line_start` leaves last holds nothing that any
    tail rule but the ```json one keys on."""
    end = _rstripped_end(text, line_start)
    return not _STIRRING_RE.search(text, text.rfind("\n", 0, end) + 1, end)


def _read_only_its_block(tail: _Tail, before: int) -> bool:
    """Whether the pass just made read nothing but the block it cut (ending at
    `before`) and the block above it, back to a line break, as _cut_copies needs.

    So it did when the block holds no backtick, no closing bracket without
    an opening one, and a character no opening `{"events` cut short holds:
    no fence moved, so the ```state, ```json and empty-fence rules saw less of
    what they had seen, and never such an opening; the bracket rule read the
    block's own bracket or, meeting the line break first, none; the line
    rules read the lines left last; and the flags stay as the pass left them.
    """
    block = tail.text[tail.end:before]
    return "`" not in block and ("[" in block or "]" not in block) and bool(_UNLIKE_AN_OPENING_RE.search(block))


def _cut_copies(tail: _Tail, end: int, cuts: int) -> None:
    """Repeats the cut just made (the removals from `cuts` on, of the block that
    ended at `end`) for each copy of that block standing above it.

    The caller knows the cut read nothing but its block and the block above,
    back to that one's last line break. So each copy in turn would be read
    and cut just as this block was, but for the last, whose reading reaches
    past the copies: it is left to the loop.
    """
    block = tail.text[tail.end:end]
    if "\n" not in block:
        return
    repeats = _copies(tail.text, tail.end, block) - 1
    if repeats > 0:
        tail.removals.extend(tail.removals[cuts:] * repeats)
        tail.end -= repeats * len(block)


def _copies(text: str, end: int, block: str) -> int:
    """How many copies of `block` end text[:end], back to back (found by doubling)."""
    count, batch = 0, 1
    while batch:
        stop = end - count * len(block)
        if stop >= batch * len(block) and text.endswith(block * batch, 0, stop):
            count, batch = count + batch, batch * 2
        else:
            batch //= 2
    return count


_TAIL_RULES = (
    (RULE_DANGLING_STATE, _dangling_state_fence, None),
    (RULE_DANGLING_JSON, _dangling_json_fence, None),
    (RULE_STATE_HEADING, _trailing_state_heading, _HEADING_RUN),
    (RULE_QUOTE_MARKER, _bare_quote_marker, _QUOTE_RUN),
    (RULE_EMPTY_FENCE, _empty_fence_opener, None),
)


# ------------------------------------------------------------ putting it together

class _Cleaner:
    """The reply as the whole-text steps leave it, and each piece taken out, by rule."""

    def __init__(self, text: str):
        self.text = text.strip()
        self.removals: list[tuple[str, str]] = []

    def drop(self, rule: str, step) -> list:
        """Runs a whole-text step, which returns the text and what it removed."""
        text, removed = step(self.text)
        self.text = _BLANK_RUN_RE.sub("\n\n", text).strip() if removed else self.text
        self.removals += [(rule, (p.cut if isinstance(p, _Block) else p).strip()) for p in removed]
        return removed


# A reply that announces itself ("The next passage is:", "Here is the next
# part of the story:"), with any "> " marker after the label: the 135M
# narrator's imitation of the prompt (issue 30's evaluation: "The next passage
# is: >"). Only at the very start, and only the label: the story after it
# stays. (A bare "> " opening is the turn runner's to judge, in
# prose.hold_rules: here it may be a story that quotes an action.)
_LEADING_LABEL = re.compile(
    r"\A\s*(?:here\s+is\s+)?(?:the\s+)?(?:next|following)\s+(?:passage|part|section|scene)"
    r"(?:\s+of\s+the\s+story)?(?:\s+is)?\s*:\s*(?:>\s*)*",
    re.IGNORECASE)


def _leading_label(text: str) -> tuple[str, list[str]]:
    found = _LEADING_LABEL.match(text)
    if found is None or not text[found.end():].strip():
        return text, []
    return text[found.end():], [found.group()]


def _clean(text: str, *, after_block: bool) -> tuple[str, list[_Block], list[tuple[str, str]]]:
    """Removes what the block extraction could not, then trims the tail.

    `after_block` says protocol already came out of this reply, which makes a
    bare scene line at the end part of the same pasted tail.
    """
    cleaner = _Cleaner(text)
    cleaner.drop(RULE_LEADING_LABEL, _leading_label)
    cleaner.drop(RULE_EVENT_CALL, _event_call_lines)
    inline = cleaner.drop(RULE_INLINE_PROPOSAL, _inline_proposals)
    cleaner.drop(RULE_PASTED_STATE, _pasted_sections)
    tail = _Tail(cleaner.text, cleaner.removals)
    _trim(tail, protocol_cut=after_block or bool(cleaner.removals))
    return tail.prefix, inline, tail.removals


def _trim(tail: _Tail, protocol_cut: bool) -> None:
    """Trims the tail until stable.

    The loop repeats because one leftover hides another: a `State` heading
    sat above an unfinished object, and a parroted reminder above an unclosed
    fence.
    """
    instruction_cut = False
    while True:
        before, cuts = tail.end, len(tail.removals)
        instruction_cut = _cut_tail(tail, instruction_cut)
        protocol_cut = protocol_cut or tail.end != before
        start = _trailing_scene_line(tail, protocol_cut)
        if start is not None:  # a run only when it is the pass's first cut (see _LineRun)
            tail.cut_lines(start, RULE_SCENE_LINE, _SCENE_RUNS[protocol_cut] if tail.end == before else None)
        if tail.end != before:
            if _read_only_its_block(tail, before):
                _cut_copies(tail, before, cuts)
            continue
        # The one rule that reads the whole text runs only once the cheap
        # ones are stable, so stacked leftovers do not each pay for a scan.
        start = _truncated_object(tail.prefix)
        if start is None:
            return
        tail.cut(start, RULE_TRUNCATED_OBJECT)
        protocol_cut = True


def _cut_tail(tail: _Tail, instruction_cut: bool) -> bool:
    """One pass of the cheap tail rules; whether an instruction has come off."""
    pass_start = tail.end
    bracket = _echoed_bracket(tail, instruction_cut)
    if bracket is not None:
        tail.cut(*bracket)
        instruction_cut = True
    for rule, finder, run in _TAIL_RULES:
        start = finder(tail)
        if start is None:
            continue
        if rule == RULE_DANGLING_JSON:
            _cut_json_fences(tail, start)
        else:  # a run only when it is the pass's first cut (see _LineRun)
            tail.cut_lines(start, rule, run if tail.end == pass_start else None)
    return instruction_cut


def _audit_raw(whole: str, prose: str) -> str:
    """What to keep as the raw block when no proposal was found.

    A removed suffix is kept when it was protocol (an unfinished block, a fence,
    a bracketed instruction); a pasted state section alone is not a proposal,
    so it must not mark the turn as carrying an unreadable one.
    """
    if prose == whole:
        return ""
    if whole.startswith(prose):
        removed = whole[len(prose):].strip()
        keep = _reads_as_protocol(removed) or "```" in removed or removed.startswith("[")
        return removed if keep else ""
    return whole if _reads_as_protocol(whole) else ""


def _chosen(blocks: list[_Block], inline: list[_Block]) -> _Block | None:
    """The last block of the most explicit kind found, else the last inline one."""
    if blocks:
        return [b for b in blocks if b.rule == blocks[0].rule][-1]
    return inline[-1] if inline else None


def split(text: str) -> Extraction:
    """The story, the proposed events (None when there is no readable proposal),
    the raw block for the audit, and every removal with the rule that made it.

    Nothing here consults the state or an entity: extraction is pure text, so
    the same reply always splits the same way, at write time or on replay.
    """
    whole = (text or "").strip()
    rest, blocks = _take_blocks(whole)
    prose, inline, removals = _clean(rest, after_block=bool(blocks))
    chosen = _chosen(blocks, inline)
    removals = [(b.rule, b.cut.strip()) for b in blocks] + removals
    if chosen is None:
        return Extraction(prose, None, _audit_raw(whole, prose), removals)
    return Extraction(prose, _events_of(chosen.parsed), chosen.raw, removals)
