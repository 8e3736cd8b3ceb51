"""`sparkdoctor recipe check RECIPE`: judge a recipe without launching it (registered by recipe.py). Findings,
--fail-on and exit codes as `check`: 0, 1; a bad recipe 2; a target that cannot be probed 3; no vLLM to judge
against 6.

`RecipeCheckCommand` holds the options, `run()` returns a Result (kind "recipe-check", data: the recipe check
document of sparkdoctor.conclusions.recipe_check), `check()` is the typer command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import typer

from sparkdoctor.commands.options import (
    format_option,
    matrix_option,
    output_option,
    output_path,
)
from sparkdoctor.conclusions.recipe_check import RecipeCheck
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.recipe_check import VIEW

FORMATS = VIEW.formats
SEVERITIES = ("info", "warn", "error")


@dataclass
class RecipeCheckCommand:
    """Everything `recipe check` is told; the defaults are the command line's."""

    recipe: str
    sets: list[str] = field(default_factory=list)
    python: str | None = None
    matrix: Path | None = None
    fail_on: str = "error"
    fmt: Format = Format.console
    output: Path | None = None
    container: str | None = None  # the vLLM inside this running container, read through the container CLI
    container_python: str | None = None
    image: str | None = None  # the vLLM inside a throwaway container of this image (never pulled)
    model: str | None = None  # the checkpoint the launch loads: the memory preflight (sparkdoctor/memory/)

    def refuse_bad_options(self) -> dict[str, str]:
        """Every usage error of `recipe check` (exit 2, one line); the --set overrides."""
        from sparkdoctor.commands.options import parse_sets
        from sparkdoctor.targets.choose import refuse_bad_target_options

        Format.parse(self.fmt, FORMATS)
        if self.fail_on not in SEVERITIES:
            raise UsageError(f"--fail-on {self.fail_on}: choose one of {', '.join(SEVERITIES)}")
        if self.image is not None:
            if self.python is not None or self.container is not None:
                raise UsageError("--python, --container and --image exclude each other: judge against one target")
            if not self.image.strip():
                raise UsageError("--image '': give an image name or id")
        else:
            refuse_bad_target_options(self.python, self.container, self.container_python, False)
        return parse_sets(self.sets)


def run(options: RecipeCheckCommand) -> Result[RecipeCheck]:
    """The recipe judged against its target; exit 1 when a finding is at or above --fail-on. A RecipeError,
    MatrixError (2), TargetError (3) or NoVllmToJudge (6) says how it ends."""
    from sparkdoctor.conclusions import recipe_check
    from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK
    from sparkdoctor.progress import progress_line

    overrides = options.refuse_bad_options()
    with progress_line() as progress:
        doc = recipe_check.run(options.recipe, overrides, options.python, options.matrix, options.fail_on, progress,
                               options.container, options.container_python, options.image, options.model)
    return Result("recipe check", "recipe-check", recipe_check.RecipeCheck(doc, options.matrix),
                  exit_code=EXIT_FINDINGS if doc["failed"] else EXIT_OK)


def check(
    recipe: str = typer.Argument(..., help="A recipe file (.toml, .yaml) or the name of a shipped recipe."),
    sets: list[str] | None = typer.Option(None, "--set", help="Override a parameter: key=value, or env.NAME=value (repeatable)."),
    python: str | None = typer.Option(None, "--python", help="Interpreter (or venv) of the vLLM to judge against (default: the recipe command's venv, else as check)."),
    matrix_path: Path | None = matrix_option("Matrix folder or file (default: bundled)."),
    fail_on: str = typer.Option("error", "--fail-on", help="Lowest severity that fails: info | warn | error."),
    fmt: str = format_option(*FORMATS),
    output_name: str | None = output_option(),
    container: str | None = typer.Option(None, "--container", help="Judge against the vLLM inside this running container (read through the container CLI, never changed)."),
    container_python: str | None = typer.Option(None, "--container-python", help="The interpreter inside the container or image (default: the one holding vLLM)."),
    image: str | None = typer.Option(None, "--image", help="Judge against the vLLM inside this container image (a throwaway container of it is started and removed; never pulled)."),
    model: str | None = typer.Option(None, "--model", help="The checkpoint the launch loads (a folder or a cached org/name): also judge whether it fits in the memory free now."),
) -> None:
    """Judge a recipe without launching it: stale env vars and flags, stale workarounds, wrong settings."""
    from sparkdoctor.emit import emit

    options = RecipeCheckCommand(recipe, list(sets or []), python, matrix_path, fail_on, Format(fmt),
                                 output_path("--output", output_name), container, container_python, image, model)
    raise typer.Exit(emit(run(options), options.fmt, options.output))
