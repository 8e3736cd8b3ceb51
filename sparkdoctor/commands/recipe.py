"""`sparkdoctor recipe show RECIPE` and `recipe check RECIPE` (the latter's options and run: recipe_check.py).

show: what a recipe resolves to (argv, env, model, port) and where each value came from. The pipeline
(sparkdoctor.recipes) loads inside `run_show`, so `check` never pays for PyYAML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import typer

from sparkdoctor.cli_support import DEFAULT_TIMEOUT
from sparkdoctor.commands.options import (
    Fmt,
    Output,
    Recipe,
    Sets,
    Timeout,
    format_option,
    parse_sets,
    verb,
)
from sparkdoctor.recipes.model import Recipe as ResolvedRecipe
from sparkdoctor.result import Format, Result
from sparkdoctor.views.recipe import VIEW

SHOW_FORMATS = VIEW.formats


@dataclass
class RecipeShowCommand:
    recipe: Recipe
    sets: Sets = field(default_factory=list)
    fmt: Annotated[Fmt, format_option(*SHOW_FORMATS)] = Format.console
    output: Output = None
    timeout: Timeout = DEFAULT_TIMEOUT

    def refuse_bad_options(self) -> dict[str, str]:
        """Every usage error of `recipe show` (exit 2, one line); the --set overrides."""
        from sparkdoctor.runlimit import refuse_bad_timeout

        Format.parse(self.fmt, SHOW_FORMATS)
        overrides = parse_sets(self.sets)
        refuse_bad_timeout(self.timeout)
        return overrides


def run_show(options: RecipeShowCommand) -> Result[ResolvedRecipe]:
    """The recipe resolved; a RecipeError (one line naming the file and field) or OutOfTime is exit 2 by itself. The
    recipe's warnings go to stderr under --format json (the console shows them in the document)."""
    from sparkdoctor.recipes import load
    from sparkdoctor.runlimit import run_limit

    overrides = options.refuse_bad_options()
    with run_limit(options.timeout, "recipe show"):
        resolved = load(options.recipe, overrides)
    notes = list(resolved.warnings) if options.fmt is Format.json else []
    return Result("recipe show", "recipe", resolved, notes=notes)


def register(app: typer.Typer) -> None:
    from sparkdoctor.commands import recipe_check

    recipe_app = typer.Typer(help="Read serving recipes (ours, eugr/spark-vllm-docker, sparkrun).", no_args_is_help=True)
    recipe_app.command("show")(verb(RecipeShowCommand, run_show, """
        Show the resolved command, env, model and port of a recipe, and where each value came from."""))
    recipe_app.command("check")(verb(recipe_check.RecipeCheckCommand, recipe_check.run, recipe_check.HELP))
    app.add_typer(recipe_app, name="recipe")
