"""Where a rendered document goes, as far as a renderer cares: a terminal or a file, Unicode or ASCII.

Every renderer takes a `Sink`; `sparkdoctor.emit` makes one for the stream or file a command writes to. It sits at
the base so that the views (sparkdoctor/views/) import it without importing emit.
"""

from __future__ import annotations

import functools
import io
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from sparkdoctor.text import shown

if TYPE_CHECKING:
    from rich.console import (
        Console,
        ConsoleOptions,
        ConsoleRenderable,
        RenderableType,
        RenderHook,
        RenderResult,
    )

FILE_WIDTH = 110
"""Console output written to a file is plain text (no colour) this many columns wide."""
WIDE = 160
"""Columns of a wide document's console output on a pipe (whole table rows, not wrapped ones)."""


@dataclass(frozen=True)
class Sink:
    """Where a rendered document goes, as far as rendering cares."""

    to_file: bool = False
    """-o FILE: console output is plain (no colour), FILE_WIDTH columns."""
    ascii_only: bool = False
    """The stream cannot encode the report's symbols (PYTHONIOENCODING=ascii): spell them in ASCII."""

    def console(self, width: int | None = None, **settings: Any) -> Console:
        """A rich Console for this sink (`settings`: more of rich's Console arguments, e.g. soft_wrap); draw into
        it inside `capture()`."""
        # imported on use: `check --format json` never draws with rich
        from rich.console import Console

        if self.to_file:
            return escaping(Console(file=io.StringIO(), width=FILE_WIDTH, no_color=True, force_terminal=False, **settings))
        size = shutil.get_terminal_size()  # COLUMNS, else the terminal's: rich draws a TERM=dumb one 80 wide
        return escaping(Console(width=width or size.columns, height=size.lines, **settings,
                                file=unwritten(sys.stdout) if sys.stdout is not None else io.StringIO()))

    def capture(self, draw: Callable[[Console], None], width: int | None = None, **settings: Any) -> str:
        """What `draw` prints on this sink's console, as one string (nothing is written yet)."""
        console = self.console(width, **settings)
        with console.capture() as captured:
            draw(console)
        return captured.get()

    def at_terminal(self) -> bool:
        """stdout is a real terminal (and no -o FILE): the one place a view fits its lines to the width and lets rich
        wrap them under their columns (sparkdoctor/views/fitted.py). A pipe or a file gets the lines whole, whatever
        COLUMNS or FORCE_COLOR say: scripts read them one item a line."""
        return not self.to_file and sys.stdout is not None and sys.stdout.isatty()

    def wide(self, draw: Callable[[Console], None]) -> str:
        """What `draw` prints: a terminal's width on a terminal, WIDE columns on a pipe, the file width on -o FILE."""
        return self.capture(draw, None if self.at_terminal() else WIDE)  # -o FILE: FILE_WIDTH, whatever is asked


class _Unwritten(io.RawIOBase):
    """stdout as a Sink's console sees it: whether it is a terminal (and, through unwritten(), its encoding), never a
    write. The console only draws into capture(); rich still writes and flushes its file as a capture ends, and on
    stdout that cannot be written (`> /dev/full`) that was an internal error. emit.write_stdout writes the document."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return len(b)

    def isatty(self) -> bool:
        return self._stream.isatty()


def unwritten(stream: TextIO) -> TextIO:
    return io.TextIOWrapper(io.BufferedWriter(_Unwritten(stream)), encoding=getattr(stream, "encoding", None) or "utf-8")


# Control characters from inputs (a ledger's model name, a snapshot's env, a matrix file's name) never reach the
# terminal raw: every console a Sink makes escapes them, whichever renderer drew the text.
def escaping(console: Console) -> Console:
    """`console`, printing every string with its control characters escaped, whichever renderer drew it and
    whether or not it went through Ink (the catch-all behind Ink.plain, which escapes before layout)."""
    console.push_render_hook(_escape_hook())
    return console


@functools.cache
def _escape_hook() -> RenderHook:
    # imported on use: `check --format json` never draws with rich
    from rich.console import RenderHook
    from rich.segment import Segment

    class Escaped:
        """A renderable whose text segments have their control characters escaped (rich's own styles and links
        are not in a segment's text: they are added when the segments are written)."""

        def __init__(self, inner: RenderableType) -> None:
            self.inner = inner

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            for segment in console.render(self.inner, options):
                if segment.control is None and not segment.text.isprintable():
                    yield Segment(shown(segment.text), segment.style)
                else:
                    yield segment

    class EscapeHook(RenderHook):
        def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
            return [Escaped(r) for r in renderables]

    return EscapeHook()


_SGR_AT_END = re.compile(r"\x1b\[[0-9;]*m\Z")


def unpadded(text: str) -> str:
    """`text` without the spaces rich pads each line with to the console's width, also those before a line's closing
    colour codes (FORCE_COLOR on a pipe): a pipe or file gets no trailing blanks; a terminal is drawn as rich draws."""
    out = []
    for line in text.split("\n"):
        codes = []
        while True:
            line = line.rstrip(" ")
            end = _SGR_AT_END.search(line)
            if end is None:
                break
            codes.append(end.group())
            line = line[: end.start()]
        out.append(line + "".join(reversed(codes)))
    return "\n".join(out)
