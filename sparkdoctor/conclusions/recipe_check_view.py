"""The views of `recipe check` (sparkdoctor/views.py): its document (sparkdoctor.conclusions.recipe_check) as
console text, JSON, JUnit XML and SARIF. The drawing itself is the conclusions package's and render/sarif.py's."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink

CONSOLE_WIDTH = 160
"""Columns of the console table when stdout is not a terminal (a CI log): wide enough for an evidence line."""


def recipe_check_view_json(result: Result, sink: Sink) -> dict[str, object]:
    document: dict[str, object] = result.data
    return document


def recipe_check_view_console(result: Result, sink: Sink) -> str:
    from sparkdoctor.conclusions import render

    tty = sys.stdout is not None and sys.stdout.isatty()
    return sink.capture(lambda console: render.recipe_check(console, result.data), width=None if tty else CONSOLE_WIDTH)


def recipe_check_view_junit(result: Result, sink: Sink) -> str:
    from sparkdoctor.conclusions import junit

    return str(junit.render(result.data)) + "\n"


def recipe_check_view_sarif(result: Result, sink: Sink) -> str:
    from sparkdoctor.matrix import load
    from sparkdoctor.render.sarif import render_recipe_sarif

    return render_recipe_sarif(result.data, load(result.options.get("matrix"))) + "\n"
