"""`recipe show`'s view: the recipe resolved, on the console (recipes/show.py draws it) or as its JSON document."""

from __future__ import annotations

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.show import document, render_console
from sparkdoctor.result import Format
from sparkdoctor.views import View

VIEW = View(Recipe, {Format.console: lambda result, sink: sink.capture(lambda console: render_console(result.data, console)),
                     Format.json: lambda result, sink: document(result.data)})
