"""Every document and the formats it renders in, keyed by the document's class: one typed registry, so `--format`'s
choices, the renderers and the exhaustive test (tests/contract/test_vocabularies.py, which imports every module here)
read the same list.

A view module (sparkdoctor/views/<verb>.py) registers `View(DocumentClass, {Format: draw})` when it is imported; a
command imports its own view (so `check` loads no other verb's) and takes `--format`'s choices from it. A draw
function takes `(result, sink)` and returns the whole text, final newline included (console, junit, markdown, ...)
or, for `json`, the document as a dict (emit puts the common header in front of it). check's view loads its drawing
modules only when their format is asked for (its start-up); the other views import theirs at the top.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result, with_header
from sparkdoctor.sink import Sink

if TYPE_CHECKING:
    from rich.console import Console

D = TypeVar("D")
Drawn = str | dict[str, object] | list[dict[str, object]]
"""A draw function's answer: the whole text, or (json) the document, or (matrix list) a bare array."""

REGISTRY: dict[type, View[Any]] = {}
"""Document class -> its view; filled by the view modules as they are imported."""


class View(Generic[D]):
    """How one document class renders: one draw function per format, in the order `--format` lists them."""

    def __init__(self, document: type[D], draw: dict[Format, Callable[[Result[D], Sink], Drawn]]) -> None:
        self.document, self.draw = document, draw
        REGISTRY[document] = self

    @property
    def formats(self) -> tuple[Format, ...]:
        return tuple(self.draw)


def drawn(render: Callable[[D, Console], None]) -> Callable[[Result[D], Sink], str]:
    """The console draw of a document that `render(document, console)` prints."""
    return lambda result, sink: sink.capture(lambda console: render(result.data, console))


def view_of(document: object) -> View[Any] | None:
    """The view registered for `document`'s class (or the nearest class it derives from)."""
    return next((REGISTRY[cls] for cls in type(document).__mro__ if cls in REGISTRY), None)


def render(result: Result[object], fmt: Format, sink: Sink) -> str:
    """The whole document, ready to write."""
    view = view_of(result.data)
    if view is None or fmt not in view.draw:
        allowed = ", ".join(f.value for f in (view.formats if view else ()))
        raise UsageError(f"--format {fmt.value}: `{result.command}` writes {allowed or 'no document'}")
    rendered = view.draw[fmt](result, sink)
    if fmt is Format.json:
        # a bare array stays one (`matrix list`): it has no keys to put a header beside
        return dump(with_header(result, rendered) if isinstance(rendered, dict) else rendered)
    return str(rendered)


def dump(document: object) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"
