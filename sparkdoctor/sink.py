"""Where a rendered document goes, as far as a renderer cares: a terminal or a file, Unicode or ASCII.

Every renderer takes a `Sink`; `sparkdoctor.emit` makes one for the stream or file a command writes to. It sits at
the base so that renderers anywhere (render/, and the pipelines' own renderers) import it without importing emit.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

FILE_WIDTH = 110
"""Console output written to a file is plain text (no colour) this many columns wide."""


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
        from rich.console import Console

        if self.to_file:
            return Console(file=io.StringIO(), width=FILE_WIDTH, no_color=True, force_terminal=False, **settings)
        return Console(width=width, file=sys.stdout if sys.stdout is not None else io.StringIO(), **settings)

    def capture(self, draw: Callable[[Console], None], width: int | None = None, **settings: Any) -> str:
        """What `draw` prints on this sink's console, as one string (nothing is written yet)."""
        console = self.console(width, **settings)
        with console.capture() as captured:
            draw(console)
        return captured.get()
