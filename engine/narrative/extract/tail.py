"""The reply as the tail rules leave it, read without copying it.

Every tail rule asks the same few things of the end of the reply (its last
line, its last bracket and fence, the first ```state opener) and every cut
only moves that end back, so one view answers them all from what it read
before; the runs of lines a rule would cut one pass at a time are found here
too, where a cut is made.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import re

from .lines import rstripped_end

__all__ = ["LineRun", "Tail"]

# Our own ```state label opening a block: at a line's end, straight into the
# payload, or at the end of the text.
_DANGLING_STATE_RE = re.compile(r"```state[^\S\n]*(?:\n|(?=[\[{])|\Z)", re.IGNORECASE)

_FENCE_LINE_RE = re.compile(r"^[^\S\n]*```", re.MULTILINE)


class Tail:
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
        self.end = rstripped_end(self.text, start)

    def cut_lines(self, start: int, rule: str, run: LineRun | None) -> None:
        """Cuts the last line from `start`, and with it the run of its kind it ends, if any."""
        first = run.start(self.text, self.end) if run is not None else None
        if first is None or first == start:
            self.cut(start, rule)
            return
        lines = filter(None, map(str.strip, reversed(self.text[first:self.end].split("\n"))))
        for line, same in itertools.groupby(lines):  # a removal a line, one tuple for equal ones
            self.removals += [(rule, line)] * len(list(same))
        self.end = rstripped_end(self.text, first)


class LineRun:
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
