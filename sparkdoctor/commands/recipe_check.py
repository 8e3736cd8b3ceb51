"""`sparkdoctor recipe check RECIPE`: judge a recipe without launching it (registered by recipe.py). Findings,
--fail-on and exit codes as `check`: 0, 1; a bad recipe 2; a target that cannot be probed 3; no vLLM to judge
against 6.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    Fmt,
    Output,
    Recipe,
    Sets,
    format_option,
    parse_sets,
)
from sparkdoctor.conclusions.recipe_check import RecipeCheck
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.recipe_check import VIEW

FORMATS = VIEW.formats
SEVERITIES = ("info", "warn", "error")


@dataclass
class RecipeCheckCommand:
    recipe: Recipe
    sets: Sets = field(default_factory=list)
    python: Annotated[str | None, typer.Option("--python", help="Interpreter (or venv) of the vLLM to judge against (default: the recipe command's venv, else as check)."), NAMES_A_FILE] = None
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder or file (default: bundled).")] = None
    fail_on: Annotated[str, typer.Option("--fail-on", help="Lowest severity that fails: info | warn | error.")] = "error"
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    container: Annotated[str | None, typer.Option("--container", help="Judge against the vLLM inside this running container (read through the container CLI, never changed).")] = None
    container_python: Annotated[str | None, typer.Option("--container-python", help="The interpreter inside the container or image (default: the one holding vLLM).")] = None
    image: Annotated[str | None, typer.Option("--image", help="Judge against the vLLM inside this container image (a throwaway container of it is started and removed; never pulled).")] = None
    model: Annotated[str | None, typer.Option("--model", help="The checkpoint the launch loads (a folder or a cached org/name): also judge whether it fits in the memory free now.")] = None

    def refuse_bad_options(self) -> dict[str, str]:
        """Every usage error of `recipe check` (exit 2, one line); the --set overrides."""
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
    MatrixError (2), TargetError (3) or NoVllmToJudge (6) says how it ends; a named target without vLLM is 6 too."""
    from sparkdoctor.conclusions import recipe_check
    from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_NO_VLLM, EXIT_OK
    from sparkdoctor.progress import progress_line

    overrides = options.refuse_bad_options()
    with progress_line(command="recipe check") as progress:
        found = recipe_check.run(options.recipe, overrides, options.python, options.matrix, options.fail_on, progress,
                                 options.container, options.container_python, options.image, options.model)
    # findings fail as check's do; a named target without the vLLM the recipe runs is no pass either (6, as unnamed)
    code = EXIT_FINDINGS if found.document["failed"] else EXIT_NO_VLLM if found.no_vllm else EXIT_OK
    return Result("recipe check", "recipe-check", found, exit_code=code)


HELP = "Judge a recipe without launching it: stale env vars and flags, stale workarounds, wrong settings."
