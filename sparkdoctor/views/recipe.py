"""`recipe show`'s view: the recipe resolved, on the console (recipes/show.py draws it) or as its JSON document."""

from __future__ import annotations

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.show import document, render_console
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View


def _console(result: Result[Recipe], sink: Sink) -> str:
    return sink.capture(lambda console: render_console(result.data, console))


VIEW = View(Recipe, {Format.console: _console, Format.json: lambda result, sink: document(result.data)})
