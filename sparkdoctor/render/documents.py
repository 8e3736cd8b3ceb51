"""The views of the documents that render themselves (fix, bench, history, conclusions, rerun): each is a
dataclass with `to_json()` (the document's keys, as they always were) and `console_text(sink)` (the whole console
output). sparkdoctor/views.py names these two functions for every such kind.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink

WIDE = 160
"""Columns of console output on a pipe (whole table rows, not wrapped ones); a terminal keeps its own width."""


class Document(Protocol):
    """What a command's `run()` puts in `Result.data` for these views."""

    def to_json(self) -> dict[str, Any]: ...

    def console_text(self, sink: Sink) -> str: ...


def document_console(result: Result, sink: Sink) -> str:
    document: Document = result.data
    return document.console_text(sink)


def document_json(result: Result, sink: Sink) -> dict[str, Any]:
    document: Document = result.data
    return document.to_json()


def wide_capture(sink: Sink, draw: Callable[[Console], None]) -> str:
    """What `draw` prints: a terminal's width on a terminal, WIDE columns on a pipe, the file width on -o FILE."""
    on_terminal = sys.stdout is not None and sys.stdout.isatty()
    return sink.capture(draw, None if on_terminal else WIDE)


