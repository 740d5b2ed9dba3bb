"""The deterministic, heading-aware chunker: a source's text -> passages.

Pure (no clock, no randomness, no database): the same text always gives the
same passages, in the same order, with the same hashes, so a reindex or a
re-import reproduces the library exactly. Any change to the output for the same
input must bump CHUNKING_VERSION, which makes every stored source reprocess.

Shape: Markdown is read into blocks (paragraphs, whole fenced code blocks,
tables), each tagged with its heading trail ("Setting > Westhaven"); ATX
(`# Title`) and setext (`Title` underlined with `===` or `---`) headings both
count. An ENTRY_BREAK line closes every heading opened since the document's
preamble, so a heading inside one entry of a worldbook never becomes the parent
of the entries after it. Blocks are packed into passages of at most TARGET_MAX
tokens; a heading closes a passage only once it has MIN_TOKENS, so a document
of one-line sections does not become a pile of fragments. A block over HARD_MAX
is cut: prose at sentence ends, code at lines, a table at rows with its header
row repeated in every piece. Plain text is paragraphs (blank lines) cut at
sentence ends. There is no overlap: the heading trail carries the context
instead, and overlap would spend a bounded budget on repeated text.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import NamedTuple

from tqdm.auto import tqdm

from ..budget import tokens
from ..search.lexical import index_line

__all__ = [
    "CHUNKING_VERSION",
    "ENTRY_BREAK",
    "HARD_MAX",
    "MIN_TOKENS",
    "PARSER_VERSION",
    "TARGET_MAX",
    "Chunk",
    "chunk",
    "digest",
    "index_line",
    "normalize",
]

PARSER_VERSION = 2
CHUNKING_VERSION = 2
# The packing ceiling, in the context builder's own tokens (cl100k), so a
# passage costs what the budget says it costs. Measured (notebooks/
# retrieval_eval.ipynb, "passage sizes"): at the 4,096 window the knowledge
# budget of a new campaign is 879 tokens and Reference may take half, 439,
# of which the class header and a passage's label and tags take ~80; the old
# 800 let only 7 of 317 novel passages ever be shown there. 256 fits that
# share with room for the label, and is also about what MiniLM reads: it
# embeds at most 256 word pieces, so a longer passage is judged by its opening.
TARGET_MAX = 256
# A passage must reach this before a heading may close it: below it a reference
# file of one-line headings became dozens of ten-token fragments.
MIN_TOKENS = 60
# Over-long blocks are cut into pieces this size, a little under the ceiling
# so a piece plus a heading line written at a crossing still fits.
HARD_MAX = 232
TRAIL_SEPARATOR = " > "
# A bar for files with more blocks than this (~1 MB of prose).
_PROGRESS_BLOCKS = 5000
# A line that ends one entry of a collection (a worldbook's entries, a wiki's
# pages) and starts the next: headings opened inside an entry end with it.
ENTRY_BREAK = "<!-- entry -->"

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# A setext underline: a run of '=' (level 1) or '-' (level 2) under a paragraph.
_SETEXT = re.compile(r"^ {0,3}(=+|-{2,})\s*$")
# A table's delimiter row: | --- | :---: | (outer pipes optional).
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$|^\s*\|\s*:?-{3,}:?\s*\|\s*$")
# A sentence ends at . ! or ? (closing quotes and brackets may follow) before space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)\]])\s+")


@dataclass(frozen=True)
class Chunk:
    """One passage: position in the source, heading trail, text, size, identity."""

    index: int
    heading: str
    text: str
    tokens: int
    content_hash: str

    @property
    def line(self) -> str:
        """What is indexed and embedded (see `index_line`)."""
        return index_line(self.heading, self.text)


def normalize(text: str) -> str:
    """The form used for identity and chunking (never stored as the source).

    NFC, one newline convention, no trailing spaces, no outer blank lines: two
    saves of the same document by different editors get the same identity.
    """
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def digest(text: str) -> str:
    """SHA-256 of the normalised text: a source's content identity."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def _passage_hash(heading: str, body: str) -> str:
    # The heading is part of the identity: it is retrieved and shown with the text.
    return hashlib.sha256(f"{heading}\n{body}".encode()).hexdigest()


# ------------------------------------------------------------------ blocks
@dataclass(frozen=True)
class _Block:
    trail: str
    text: str
    tokens: int
    code: bool = False

    @property
    def table(self) -> bool:
        return not self.code and any(_TABLE_RULE.match(line) for line in self.text.split("\n")[:8])


def _setext(line: str, buffer: list[str]) -> int:
    """The level of a setext heading that `line` underlines, or 0. Only a
    single-line paragraph of text can be one: a '---' under a table row or
    a list item is a rule, not a heading."""
    m = _SETEXT.match(line)
    if not m or len(buffer) != 1 or not buffer[0].strip():
        return 0
    first = buffer[0].lstrip()
    if first.startswith(("|", "-", "*", "+", ">")) or first[:1].isdigit() and ". " in first[:5]:
        return 0
    return 1 if m.group(1)[0] == "=" else 2


def _blocks(text: str, markdown: bool) -> list[_Block]:
    """Paragraphs, tables and fenced code blocks, each with the heading trail above it."""
    out: list[_Block] = []
    stack: list[tuple[int, str]] = []
    preamble: list[tuple[int, str]] | None = None  # the stack when the first entry began
    buffer: list[str] = []
    fence = ""  # the fence character while inside a fenced block

    def flush(code: bool = False) -> None:
        body = "\n".join(buffer).strip()
        buffer.clear()
        if body:
            trail = TRAIL_SEPARATOR.join(title for _, title in stack)
            out.append(_Block(trail, body, tokens.count(body), code))

    def open_heading(level: int, title: str) -> None:
        while stack and stack[-1][0] >= level:
            stack.pop()
        if title:
            stack.append((level, title))

    for line in text.split("\n"):
        if markdown and (m := _FENCE.match(line)):
            mark = m.group(1)[0]
            if not fence:  # opening: a code block is a block of its own
                flush()
                fence = mark
                buffer.append(line)
                continue
            if mark == fence:  # only the same character closes it
                buffer.append(line)
                fence = ""
                flush(code=True)
                continue
        if fence:  # inside code: no headings, blank lines do not split
            buffer.append(line)
            continue
        if markdown and line.strip() == ENTRY_BREAK:
            flush()
            preamble = list(stack) if preamble is None else preamble
            stack[:] = preamble
            continue
        heading = _HEADING.match(line) if markdown else None
        level = _setext(line, buffer) if markdown and not heading else 0
        if heading:
            flush()
            open_heading(len(heading.group(1)), heading.group(2).strip())
        elif level:
            title = buffer.pop().strip()
            open_heading(level, title)
        elif not line.strip():
            flush()
        else:
            buffer.append(line)
    flush(code=bool(fence))
    return out


# ------------------------------------------------------------ long blocks
class _Ceilings(NamedTuple):
    target: int
    hard: int


# The ceilings of the chunk() call in progress: the shipped ones unless a
# measurement asks chunk() for others (a context variable, so a call in
# another thread never sees them, and no constant is ever changed).
_CEILINGS: ContextVar[_Ceilings] = ContextVar("chunk_ceilings", default=_Ceilings(TARGET_MAX, HARD_MAX))  # noqa: B039 - a NamedTuple cannot change


def _ceiling() -> _Ceilings:
    return _CEILINGS.get()


def _slices(word: str) -> list[str]:
    """Cut one enormous 'word' (base64, unsegmented script) into pieces that
    each fit _ceiling().hard. The slice length starts from the word's own
    characters-per-token and shrinks until it fits, so CJK text (several
    tokens per character) is safe as well as 'xxxx...' (many characters per
    token)."""
    per_token = max(len(word) / max(tokens.count(word), 1), 0.25)
    out, start = [], 0
    while start < len(word):
        size = max(1, int(_ceiling().hard * per_token * 0.95))
        while size > 1 and tokens.count(word[start:start + size]) > _ceiling().hard:
            size = max(1, int(size * 0.8))
        out.append(word[start:start + size])
        start += size
    return out


def _word_runs(sentence: str) -> list[str]:
    """A sentence over _ceiling().hard as runs of whole words, each within _ceiling().hard."""
    runs: list[str] = []
    run: list[str] = []
    size = 0
    for word in sentence.split():
        cost = tokens.count(word + " ")
        if cost > _ceiling().hard:
            if run:
                runs.append(" ".join(run))
                run, size = [], 0
            runs.extend(_slices(word))
            continue
        if run and size + cost > _ceiling().hard:
            runs.append(" ".join(run))
            run, size = [], 0
        run.append(word)
        size += cost
    if run:
        runs.append(" ".join(run))
    return runs


def _units(block: _Block) -> tuple[list[str], str]:
    """The pieces a long block is re-packed from, and the string that joins them.

    Code and tables split on lines (their newlines matter); prose on
    sentence ends.
    """
    if block.code or block.table:
        parts, joiner = block.text.split("\n"), "\n"
    else:
        parts, joiner = [p.strip() for p in _SENTENCE_END.split(block.text)], " "
    units: list[str] = []
    for part in parts:
        if not part.strip() and joiner == " ":
            continue
        units.extend([part] if tokens.count(part) <= _ceiling().hard else _word_runs(part))
    return units, joiner


def _table_head(block: _Block) -> str:
    """A table's lines up to and including its delimiter row: repeated at the
    top of every piece, so each piece still says what its columns mean."""
    lines = block.text.split("\n")
    for i, line in enumerate(lines[:8]):
        if _TABLE_RULE.match(line):
            head = "\n".join(lines[: i + 1])
            return head if tokens.count(head) <= _ceiling().hard // 2 else ""
    return ""


def _split_long(block: _Block) -> list[_Block]:
    head = _table_head(block) if block.table else ""
    units, joiner = _units(block)
    if head:
        units = units[head.count("\n") + 1:]
    pieces: list[_Block] = []
    buffer: list[str] = [head] if head else []
    size = tokens.count(head) + 1 if head else 0
    start = len(buffer)
    for unit in units:
        cost = tokens.count(unit) + 1  # +1: the joiner, counted generously
        if len(buffer) > start and size + cost > _ceiling().hard:
            pieces.append(_piece(block, joiner.join(buffer)))
            buffer = [head] if head else []
            size = tokens.count(head) + 1 if head else 0
        buffer.append(unit)
        size += cost
    if len(buffer) > start:
        pieces.append(_piece(block, joiner.join(buffer)))
    return [p for p in pieces if p.text] or [block]


def _piece(block: _Block, text: str) -> _Block:
    text = text.strip()
    return _Block(block.trail, text, tokens.count(text), block.code)


# ---------------------------------------------------------------- packing
_JOIN = "\n\n"


@dataclass
class _Group:
    heading: str  # the trail the passage is filed under (narrowed when mixed)
    first: str  # trail of its first piece
    last: str  # trail of its newest piece
    parts: list[str] = field(default_factory=list)
    tokens: int = 0
    mixed: bool = False


def _heading_line(trail: str) -> str:
    return f"## {trail}"


def _line_cost(text: str) -> int:
    return tokens.count(text) + tokens.count(_JOIN)


def _common(a: str, b: str) -> str:
    shared = []
    for x, y in zip(a.split(TRAIL_SEPARATOR), b.split(TRAIL_SEPARATOR), strict=False):
        if x != y or not x:
            break
        shared.append(x)
    return TRAIL_SEPARATOR.join(shared)


def _crossing_cost(group: _Group, trail: str, *, write_trail: bool = True) -> int:
    cost = 0
    if not group.mixed and group.heading:
        cost += _line_cost(_heading_line(group.heading))
    if write_trail and trail:
        cost += _line_cost(_heading_line(trail))
    return cost


def _cross(group: _Group, trail: str, *, write_trail: bool = True) -> None:
    """Let a group under MIN_TOKENS run on past a heading: the headings it
    crosses are written into its text (the first one too, which would
    otherwise survive nowhere) and its filing trail narrows to what is shared."""
    if not group.mixed:
        group.mixed = True
        if group.heading:
            group.parts.insert(0, _heading_line(group.heading))
            group.tokens += _line_cost(group.parts[0])
    if write_trail and trail:
        group.parts.append(_heading_line(trail))
        group.tokens += _line_cost(group.parts[-1])
    group.last = trail
    group.heading = _common(group.heading, trail)


def _pack(blocks: Iterable[_Block]) -> list[_Group]:
    groups: list[_Group] = []
    group: _Group | None = None
    for block in blocks:
        for piece in _split_long(block) if block.tokens > _ceiling().hard else [block]:
            cost = piece.tokens + tokens.count(_JOIN)
            if group is not None:
                changed = piece.trail != group.last
                extra = _crossing_cost(group, piece.trail) if changed else 0
                if group.tokens + extra + cost > _ceiling().target or (changed and group.tokens >= MIN_TOKENS):
                    groups.append(group)
                    group = None
            if group is None:
                group = _Group(piece.trail, piece.trail, piece.trail)
            elif piece.trail != group.last:
                _cross(group, piece.trail)
            group.parts.append(piece.text)
            group.tokens += cost
    if group is not None:
        groups.append(group)
    return _absorb_trailing(groups)


def _absorb_trailing(groups: list[_Group]) -> list[_Group]:
    """Packing decides a close only when the next piece arrives, so the last
    group can be a fragment: fold it back into the one before when they fit."""
    if len(groups) < 2 or groups[-1].tokens >= MIN_TOKENS:
        return groups
    prev, last = groups[-2], groups[-1]
    changed = last.first != prev.last
    # A mixed last group already starts with its own heading line.
    extra = _crossing_cost(prev, last.first, write_trail=not last.mixed) if changed else 0
    if prev.tokens + extra + last.tokens > _ceiling().target:
        return groups
    if changed:
        _cross(prev, last.first, write_trail=not last.mixed)
    prev.parts.extend(last.parts)
    prev.tokens += last.tokens
    prev.heading = _common(prev.heading, last.heading)
    prev.last = last.last
    return groups[:-1]


def chunk(text: str, markdown: bool = True, *, progress: bool = False, target_max: int | None = None,
          hard_max: int | None = None) -> list[Chunk]:
    """The passages of `text` (normalised first). Plain text (`markdown=False`)
    uses the same packing with no headings or fences: '#' is just a character.
    `progress` shows a bar for a large file (a 16 MB one takes several seconds).
    `target_max` and `hard_max` measure other ceilings (research only: a
    library's passages must all come from the shipped ones)."""
    normal = normalize(text)
    if not normal:
        return []
    ceilings = _Ceilings(target_max or TARGET_MAX, hard_max or HARD_MAX)
    reset = _CEILINGS.set(ceilings)
    try:
        return _chunk(normal, markdown, progress)
    finally:
        _CEILINGS.reset(reset)


def _chunk(normal: str, markdown: bool, progress: bool) -> list[Chunk]:
    out: list[Chunk] = []
    blocks = _blocks(normal, markdown)
    shown = tqdm(blocks, desc="chunking", unit="block", leave=False,
                 disable=not progress or len(blocks) < _PROGRESS_BLOCKS)
    for group in _pack(shown):
        body = _JOIN.join(group.parts).strip()
        if body:
            out.append(Chunk(len(out), group.heading, body, tokens.count(body), _passage_hash(group.heading, body)))
    return out
