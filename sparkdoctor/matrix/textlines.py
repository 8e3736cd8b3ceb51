"""A text's lines held as the text itself and where each line starts and ends in it, not as a list of strings.

explain reads logs of up to 256 MiB; a list of a million lines costs about 1.5 times the text again (a string object
a line). The matcher needs the lines only one at a time, and which lines hold a string: one scan of the whole text.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines() ends a line ("\r\n" ends one)
BREAK = re.compile(f"\r\n|[{BREAKS}]")
BATCH = 1 << 20  # characters of lines joined at a time while building
BATCH_LINES = 4096  # and lines: a batch of short lines is a string object each until it is joined


@dataclass(frozen=True)
class Lines:
    """Line i is text[starts[i]:ends[i]]; at least one line."""

    text: str
    starts: array[int]
    ends: array[int]

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> str:
        return self.text[self.starts[i]:self.ends[i]]

    def window(self, i: int, span: int) -> str:
        """The text from line i's start to line i + span - 1's end."""
        return self.text[self.starts[i]:self.ends[i + span - 1]]

    def holding(self, needle: str) -> list[int]:
        """The lines that hold `needle` (within the line), in order: [i for i, line in enumerate(lines) if needle in
        line], from one scan of the text."""
        found: list[int] = []
        pos = self.text.find(needle)
        while pos >= 0:
            i = bisect_right(self.starts, pos) - 1  # the last line starting at or before pos
            if pos + len(needle) <= self.ends[i]:
                found.append(i)
            if i + 1 >= len(self.starts):  # one that runs past this line's end, any later start in it would too
                break
            pos = self.text.find(needle, self.starts[i + 1])
        return found


def split_lines(text: str) -> Lines:
    """The lines of `text` as `text.splitlines() or [text]` cuts them."""
    starts, ends = array("q"), array("q")
    prev = 0
    for cut in BREAK.finditer(text):
        starts.append(prev)
        ends.append(cut.start())
        prev = cut.end()
    if prev < len(text) or not starts:
        starts.append(prev)
        ends.append(len(text))
    return Lines(text, starts, ends)


def join_lines(lines: Iterable[str], sep: str) -> Lines:
    """`sep.join(lines)` with where each line is in it; joined a batch at a time, never a list of every line."""
    starts, ends = array("q"), array("q")
    done: list[str] = []
    batch: list[str] = []
    size = total = 0
    for line in lines:
        if starts:
            batch.append(sep)
            size += len(sep)
            total += len(sep)
        starts.append(total)
        batch.append(line)
        size += len(line)
        total += len(line)
        ends.append(total)
        if size >= BATCH or len(batch) >= BATCH_LINES:
            done.append("".join(batch))
            batch, size = [], 0
    done.append("".join(batch))
    return Lines("".join(done), starts, ends)
