"""The view of the documents that draw themselves (fix, bench, history, conclusions, rerun): each is a dataclass
with `to_json()` (the document's keys, as they always were) and `console_text(sink)` (the whole console output);
each verb registers this view for its documents' base class (sink.SelfDrawn)."""

from __future__ import annotations

from typing import Any, TypeVar

from sparkdoctor.result import Format, Result
from sparkdoctor.sink import SelfDrawn, Sink
from sparkdoctor.views import View

S = TypeVar("S", bound=SelfDrawn)


def _console(result: Result[S], sink: Sink) -> str:
    return result.data.console_text(sink)


def _json(result: Result[S], sink: Sink) -> dict[str, Any]:
    return result.data.to_json()


def self_drawn(document: type[S]) -> View[S]:
    """The view of `document`'s class and every class derived from it: console and json."""
    return View(document, {Format.console: _console, Format.json: _json})
